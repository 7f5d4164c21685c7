"""slca-verl: SLCA-GRPO for stock verl 0.9.1.

verl imports :mod:`slca_verl.plugin` through the ``verl.plugins`` entry point, and that module performs every
registration. The package imports verl first, so that whichever of its modules a script imports first, verl's
plugin loading runs before that module does: otherwise ``from slca_verl.core_algos import …`` as a script's first
line would start verl's plugin loading from inside a half-imported ``core_algos``, and the modules that need it
(``slca_sync``, the baselines) would fail to register.
"""

import verl  # noqa: F401  (see above: loads the plugin before any module of this package runs)

__version__ = "0.1.0"
