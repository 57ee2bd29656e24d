from cli.remote_storage.command import main

raise SystemExit(main())
