"""The harness: what runs the book's experiments at a scale and times them, above the library.

* ``reproduce``: the recorded reproduction (``make record``), and sweeps of a chapter's
  parameter; ``recipe`` and ``runner``: its units, predicted from measured rates and run;
* ``bundle``: an offline bundle of everything a run reads, for a machine without a network;
* ``bench`` (with ``contenders``): training steps timed against transformers, the speed run;
* ``pretrain``: pre-training's command line, on one GPU or many.
"""

import argparse


def command_line(module: str, doc: str) -> argparse.ArgumentParser:
    """The parser of ``python -m <module>``, described by the first line of its ``doc``."""
    return argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
