"""``python -m sdc_client``: the ``sdc`` command line (:mod:`sdc_client.cli`)."""

from .cli import main

raise SystemExit(main())
