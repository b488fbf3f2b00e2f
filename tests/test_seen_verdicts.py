"""The check after a sweep takes the pipeline's word only when the verdicts it saw are one for each
pair of the plan: counted, keyed apart, and for the plan's own pairs (runner/store/seen.py)."""

from __future__ import annotations

from ifsweep.runner.store.seen import Owner, SeenVerdicts, owners_print

A: Owner = ("m", "infobench", "1", "j")
B: Owner = ("m", "infobench", "2", "j")
KEY = {n: f"{n:032x}" for n in range(1, 5)}


def seen(*notes: tuple[int, Owner]) -> SeenVerdicts:
    s = SeenVerdicts()
    for n, owner in notes:
        s.note(KEY[n], None, owner)
    return s


def test_one_sound_verdict_for_each_planned_pair_is_enough() -> None:
    assert seen((1, A), (2, B)).all_sound([B, A])


def test_a_pair_never_reached_is_not_hidden_by_another_seen_twice_under_two_keys() -> None:
    """As many verdicts as planned, each its own key: only the owners tell that B has none."""
    assert not seen((1, A), (2, A)).all_sound([A, B])


def test_a_key_seen_twice_a_count_that_differs_or_a_doubtful_verdict_needs_the_full_check() -> None:
    assert not seen((1, A), (1, B)).all_sound([A, B])
    assert not seen((1, A)).all_sound([A, B])
    assert not seen((1, A), (2, B), (3, B)).all_sound([A, B])
    doubtful = seen((1, A))
    doubtful.note(KEY[2], "2 rows for 3 constraints", B)
    assert not doubtful.all_sound([A, B])
    errored = seen((1, A))
    errored.note(KEY[2], None, B, error=True)
    assert not errored.all_sound([A, B])


def test_the_owners_print_is_a_multiset_print() -> None:
    assert owners_print([A, B]) == owners_print([B, A])
    assert owners_print([A, A]) != owners_print([A, B])
    assert owners_print([A, B, B])[0] == 3
