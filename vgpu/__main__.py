"""`python -m vgpu` runs the command-line interface."""

from vgpu.cli.main import main

raise SystemExit(main())
