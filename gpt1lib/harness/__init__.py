"""The harness: what runs the book's experiments at a scale and times them, above the library.

* ``reproduce``: the recorded reproduction (``make record``), and sweeps of a chapter's
  parameter through papermill;
* ``recipe`` and ``runner``: a scale's units, each a call of a chapter's own experiment
  (``gpt1lib.experiments``), predicted from measured rates and run in one process, their
  records kept under ``results/``;
* ``bundle``: an offline bundle of everything a run reads, for a machine without a network;
* ``bench`` (with ``contenders`` and ``memory``): training steps timed against transformers,
  the speed run;
* ``pretrain``: pre-training's command line, on one GPU or many.

Its commands: ``python -m gpt1lib.harness.reproduce``, ``.bench``, ``.bundle``, ``.pretrain``.
It imports the library; nothing in the library imports it.
"""
