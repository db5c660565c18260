"""The `aimc` command line: the parser and exit statuses (`cli`) and one module per sub-command."""
