"""Command-line entry points: `python -m launch.X`.

Importing this package (which `python -m launch.X` does before X) keeps
library INFO logs out of every launcher's output; `--verbosity=0` brings
them back (mdlm_wm/utils/logs.py).
"""

from mdlm_wm.utils import logs

logs.quiet_by_default()
