"""What a notebook's first code cell calls: `cfg = setup(PROFILE, SEED, DEVICE)`.

The notebook bootstrap: the run config with seeds and threads (`labkit.config.setup`),
plus what only a notebook needs -- matplotlib fonts that can draw Chinese labels.
"""

from __future__ import annotations

from labkit.config import Config
from labkit.config import setup as config_setup


def setup(profile: str = "smoke", seed: int = 0, device: str = "auto", **overrides) -> Config:
    """Config, seeds and threads (`labkit.config.setup`), then CJK fonts for the plots."""
    cfg = config_setup(profile, seed, device, **overrides)
    try:
        from labkit.viz import fonts

        fonts.configure()
    except ImportError:
        pass
    return cfg
