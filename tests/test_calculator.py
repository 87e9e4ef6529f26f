import pytest

from gpt.data.tasks.calculator import (OPERATIONS, all_problems, number_to_words, split_problems, vocabulary,
                                       words_to_number)


@pytest.mark.parametrize("n, words", [
    (0, "zero"), (7, "seven"), (13, "thirteen"), (20, "twenty"), (21, "twenty one"), (99, "ninety nine"),
    (100, "one hundred"), (105, "one hundred five"), (198, "one hundred ninety eight"),
    (1000, "one thousand"), (9801, "nine thousand eight hundred one"),
])
def test_word_forms(n: int, words: str) -> None:
    assert number_to_words(n) == words
    assert words_to_number(words) == n


def test_every_answer_round_trips_through_words() -> None:
    for problem in all_problems():
        assert words_to_number(number_to_words(problem.answer)) == problem.answer
        assert "-" not in problem.text and " and " not in problem.text


def test_non_canonical_words_are_refused() -> None:
    for text in ["twenty twenty", "five hundred and one", "fourty"]:
        with pytest.raises(ValueError):
            words_to_number(text)


def test_problem_rules() -> None:
    problems = all_problems()
    assert {p.op for p in problems} == set(OPERATIONS)
    assert all(0 <= p.a <= 99 and 0 <= p.b <= 99 for p in problems)
    assert all(p.answer >= 0 for p in problems if p.op == "minus")
    assert all(p.b != 0 and p.a % p.b == 0 for p in problems if p.op == "divided by")
    assert len({(p.a, p.op, p.b) for p in problems}) == len(problems)
    assert sum(p.op == "plus" for p in problems) == 100 * 100


def test_splits_are_disjoint_cover_everything_and_follow_the_seed() -> None:
    splits = split_problems(seed=3, val_fraction=0.1, test_fraction=0.1)
    sets = {name: set(problems) for name, problems in splits.items()}
    assert not sets["train"] & sets["val"] and not sets["train"] & sets["test"] and not sets["val"] & sets["test"]
    assert set().union(*sets.values()) == set(all_problems())
    for op in OPERATIONS:
        assert any(p.op == op for p in splits["val"])
    assert split_problems(3, 0.1, 0.1) == splits
    assert split_problems(4, 0.1, 0.1)["val"] != splits["val"]


def test_vocabulary_covers_the_corpus() -> None:
    words = set(vocabulary())
    assert all(set(p.text.split()) <= words for p in all_problems())
    assert len(words) < 45
