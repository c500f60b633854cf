"""The harness: what runs the book's experiments at a scale and times them, above the library.

* ``reproduce``: the recorded reproduction (``make record``): every chapter through papermill,
  its records kept under ``results/``; or, with ``--budget``, the whole scale in one process;
* ``plan`` and ``plan_run``: that time-budgeted plan, each unit a call of a chapter's own
  experiment (``gpt1lib.experiments``);
* ``bundle``: an offline bundle of everything a run reads, for a machine without a network;
* ``bench`` (with ``memory``): training steps timed against transformers, the speed run.

Its commands: ``python -m gpt1lib.harness.reproduce``, ``.bench``, ``.bundle``. It imports the
library; nothing in the library imports it.
"""
