"""Package list for setuptools; everything else is in pyproject.toml.

`openclaw_combine` (the name the second public page imports) is the `openclaw-combine/` method
folder itself, so the combined method has one home. pyproject.toml cannot both find packages and
add one mapped from a folder whose name is not an identifier; setup.py can.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["openclaw", "openclaw.*"]), "openclaw_combine"],
    package_dir={"openclaw_combine": "openclaw-combine"},
)
