"""Property tests of the config loader: whatever a TOML file or a `--set` holds, loading it gives a config or
raises `ConfigError` whose every line names a field or the file, and never any other exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aimc.common.errors import ConfigError
from aimc.config import apply_overrides, config_schema, read_toml, validate_config


def _field_names(schema: dict) -> set[str]:
    names = set()
    for node in [schema, *schema.get("$defs", {}).values()]:
        names |= set(node.get("properties", {}))
    return names


FIELDS = sorted(_field_names(config_schema()))
WORDS = [
    "analog_sgd",
    "residual",
    "sgd",
    "tiki_taka",
    "fcn",
    "lenet5",
    "r1_power_1",
    "r1_exp_2",
    "SoftBounds",
    "power",
    "expected",
    "pulsed",
    "mnist_small",
    "column",
    "digital",
    "analog",
]
keys = st.one_of(st.sampled_from(FIELDS), st.text(max_size=6))
scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)
tables = st.dictionaries(keys, values, max_size=6)
dotted = st.lists(
    st.one_of(st.sampled_from(FIELDS), st.sampled_from(["0", "1", "-1", "x"])), min_size=1, max_size=4
).map(".".join)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _check_message(err: ConfigError, table: dict, overrides: dict) -> None:
    """Every line of the message starts at a key the user wrote (a table key, an override) or the root."""
    written = [*table, *(k.split(".")[0] for k in overrides)]
    roots = {*written, *map(repr, written), "<root>"}  # odd keys ('', line breaks) are quoted
    head, *lines = str(err).splitlines()
    if head.startswith("override "):
        assert any(head.startswith(f"override {k!r}: ") for k in overrides), head
        return
    assert head == "invalid config:" and lines, str(err)
    for line in lines:
        assert any(line.startswith(f"{r}: ") or line.startswith(f"{r}.") for r in roots), line


@SETTINGS
@given(tables, st.dictionaries(dotted, values, max_size=3))
def test_any_table_and_overrides_load_or_name_the_field(table, overrides):
    try:
        validate_config(apply_overrides(table, overrides))
    except ConfigError as err:
        _check_message(err, table, overrides)


@SETTINGS
@given(
    st.one_of(
        st.binary(max_size=60),
        st.text(max_size=60).map(str.encode),
        st.sampled_from([b"\xef\xbb\xbfepochs = 2\n", b"epochs = 2\n\xff", b"[model]\nhidden = [8"]),
    )
)
def test_any_file_reads_or_names_the_file(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("toml") / "c.toml"
    path.write_bytes(raw)
    try:
        assert isinstance(read_toml(path), dict)
    except ConfigError as err:
        assert str(err).startswith(f"config file {str(path)!r} is not ")


def test_a_byte_order_mark_is_read_and_bad_bytes_name_their_line(tmp_path):
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbfepochs = 2\n")
    assert read_toml(tmp_path / "bom.toml") == {"epochs": 2}
    good = b"epochs = 2\n# caf"
    (tmp_path / "bad.toml").write_bytes(good + "\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=f"is not UTF-8 text .TOML is.: byte {len(good)} on line 2$"):
        read_toml(tmp_path / "bad.toml")
