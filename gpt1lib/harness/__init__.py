"""The harness, above the library: the recorded reproduction and its sweeps (``reproduce``,
``recipe``, ``runner``), the offline ``bundle``, the speed run (``bench``, ``contenders``,
``memory``) and pre-training's command line (``pretrain``).
"""

import argparse


def command_line(module: str, doc: str) -> argparse.ArgumentParser:
    """The parser of ``python -m <module>``, described by the first line of its ``doc``."""
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
