"""The recorded-benchmark figure (A.4): a run may lack a variant, and CPU and GPU speeds share
one axis."""

import matplotlib
import pandas as pd

from gpt1lib import plots

matplotlib.use("Agg")


def test_bench_figure_draws_no_bar_for_a_variant_a_run_lacks():
    rows = [
        ("cpu", "gpt1lib:matrix", "tokens_per_s", 481.0),
        ("cpu", "transformers", "tokens_per_s", 480.0),
        ("gpu compiled", "transformers", "tokens_per_s", 333_727.0),
    ]
    rows += [(run, v, "mfu", 0.5) for run, v, _, _ in rows]
    kept = pd.DataFrame(rows, columns=["run", "variant", "metric", "value"])
    fig = plots.bench_figure(kept)
    speed, mfu = fig.axes[:2]
    assert speed.get_xscale() == "log"  # 481 and 333,727 both readable
    assert sum(len(c.patches) for c in speed.containers) == 3  # none for gpt1lib:matrix on the GPU
    texts = [t.get_text() for t in speed.texts]
    assert "333,727" in texts and not any("nan" in t for t in texts)


def test_tables_show_floats_to_one_decimal_even_beside_interval_strings():
    table = pd.DataFrame({"CoLA": [45.4, "8.3 [1.9, 15.0]", float("nan")], "n": [486, 550, 1]})
    html = plots.show_table(table).to_html()
    assert "45.4<" in html and "45.400000" not in html and "8.3 [1.9, 15.0]" in html
    assert "missing" in html and ">486<" in html
