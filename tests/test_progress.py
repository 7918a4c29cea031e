"""Progress bars are text on stdout, so an executed notebook keeps their final state (100%), not a widget at 0%."""

from fmlab.progress import progress


def test_a_bar_ends_at_its_total_in_plain_text(capsys):
    with progress(total=3, desc="shards", unit="shard") as bar:
        for _ in range(3):
            bar.update(1)
    out = capsys.readouterr().out
    assert "shards: 100%" in out and "3/3" in out


def test_a_bar_wraps_an_iterable():
    assert list(progress([1, 2, 3], desc="worlds")) == [1, 2, 3]
