"""slca-verl: SLCA-GRPO for stock verl 0.9.1.

Importing this package registers nothing by itself; verl imports :mod:`slca_verl.plugin` through the
``verl.plugins`` entry point, and that module performs every registration.
"""

__version__ = "0.1.0"
