"""The ledger bench's ratios: each taken within one round, then their median over the rounds."""
import pytest

from bench.ledger import median_ratios, parse_args, ratios_text, round_ratios


def rate(pairs_per_s: float) -> dict:
    return {"pairs_per_s": pairs_per_s}


def test_a_rounds_ratio_is_its_ledger_over_its_own_raw_loops() -> None:
    baseline = {"asyncpg_rows": rate(2000), "asyncpg_one_row": rate(500)}
    ledger = {"separate": rate(1100), "one": rate(150)}
    assert round_ratios(baseline, ledger, rate(550)) == {
        "separate_vs_raw": 0.55, "separate_vs_sqlalchemy": 2.0, "one_vs_raw_one_row": 0.3}
    # Later rounds run no SQLAlchemy loop: that ratio is the first round's only.
    assert round_ratios(baseline, {"separate": rate(1100)}, None) == {"separate_vs_raw": 0.55}


def test_the_median_is_taken_per_ratio_over_the_rounds_that_have_it() -> None:
    rounds = [{"separate_vs_raw": 0.40, "separate_vs_sqlalchemy": 1.7, "one_vs_raw_one_row": 0.2},
              {"separate_vs_raw": 0.62, "one_vs_raw_one_row": 0.3},
              {"separate_vs_raw": 0.55, "one_vs_raw_one_row": 0.4}]
    assert median_ratios(rounds) == {"one_vs_raw_one_row": 0.3, "separate_vs_raw": 0.55,
                                     "separate_vs_sqlalchemy": 1.7}
    # An even count: the mean of the middle two.
    assert median_ratios(rounds[:2])["separate_vs_raw"] == 0.51


def test_a_raw_loop_that_did_nothing_gives_no_ratio_rather_than_a_division_by_zero() -> None:
    ratios = round_ratios({"asyncpg_rows": rate(0), "asyncpg_one_row": rate(0)}, {"separate": rate(900)}, None)
    assert ratios == {"separate_vs_raw": None}
    assert median_ratios([ratios]) == {"separate_vs_raw": None}
    assert ratios_text(ratios) == ""


def test_rounds_default_to_one_and_must_be_positive(capsys) -> None:
    assert parse_args([]).rounds == 1
    assert parse_args(["--rounds", "3"]).rounds == 3
    with pytest.raises(SystemExit) as stop:
        parse_args(["--rounds", "0"])
    assert stop.value.code == 2
    assert "--rounds must be 1 or more" in capsys.readouterr().err
