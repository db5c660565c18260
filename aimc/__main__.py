from aimc.cli import main

raise SystemExit(main())
