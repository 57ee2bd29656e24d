"""Why a term steps down: the first reason given is the one the controller logs."""

from __future__ import annotations

from typing import cast

from controller.leadership import Term
from controller.store.base import MetadataStore


def test_a_term_keeps_the_first_reason_it_was_given_to_step_down() -> None:
    term = Term(1, cast(MetadataStore, object()))
    assert (term.stepping_down, term.step_down_reason) == (False, "")

    term.step_down("broker 2 has seen a newer controller epoch")
    term.step_down("a metadata write failed")

    assert term.stepping_down
    assert term.step_down_reason == "broker 2 has seen a newer controller epoch"
