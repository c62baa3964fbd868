"""``--repeat auto``: repeats spent where a case's verdict is unsettled
(docs/trusting-verdicts.md, "Repeats where the verdict is unsettled").

The run goes in rounds. The first runs every case once, as a plain run would. After each
round, every case's runs so far are weighed (``agentv.results.settled``): the cases whose
pass / fail verdict is not settled at the rule's confidence, and that have fewer runs than
its ``max``, get one more run in the next round, the most unsettled first. The rounds end
when no case wants another run, or when the run's budget refused a request (the runs of
that round not sent are recorded ``skipped``, as any run the budget stops).

Each run's record says why it was made (``auto_repeat``: the rule, the case's threshold and
a ``reason``), so what a run did is read back from its results file alone: ``--resume``
of such a file goes on with the same rule, from the same runs, to the same decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentv.results.record import CaseKey
from agentv.results.settled import AutoRule, Outcome, Verdict, unsettled_first, verdict
from agentv.run.costs import Meter
from agentv.run.plan import CaseJob, InvalidJob, Lane, Plan
from agentv.run.resume import ResultsState

#: the reason a case's first run gives
FIRST_RUN = "first run"
#: the reason of a run made again on resume (its prompt changed, or it had errored)
RUN_AGAIN = "run again on resume"


@dataclass
class RoundCounts:
    """What the rounds did: how many, and how many runs beyond the first round."""

    rounds: int = 0
    extra_runs: int = 0
    last: int = 0  # runs of the latest round


class AutoRepeats:
    """Plans the rounds of a ``--repeat auto`` run from the records as they come.

    Args:
        rule: The rule (``--max-repeat``, ``--repeat-confidence``).
        plan: The run's plan (its first round: every case's first run).
    """

    def __init__(self, rule: AutoRule, plan: Plan) -> None:
        self.rule = rule
        self.plan = plan
        #: the run's meter, once it runs: a budget that refused a request ends the rounds
        self.meter: Callable[[], Meter] | None = None
        #: every case's runs so far, by repeat: the results file's and this run's
        self.runs: dict[CaseKey, dict[int, Outcome]] = {}
        self.counts = RoundCounts()
        #: the name a target's records carry -> its name in targets.yaml (they differ in
        #: a dry run): records are keyed by the first, the plan's runs by the second
        self._configured = {t.name: t.configured_name for t in plan.targets()}

    # --- what is known ------------------------------------------------------------------

    def seed(self, state: ResultsState) -> None:
        """The runs a resumed file holds (those it made under ``--repeat auto``)."""
        for key, previous in state.runs.items():
            outcome = _outcome(previous.status, previous.score, previous.auto)
            if outcome is not None:
                self.runs.setdefault(key[:3], {})[key[3]] = outcome

    def observe(self, record: Mapping[str, Any]) -> None:
        """A run's record, as it is written."""
        auto = record.get("auto_repeat")
        outcome = _outcome(record.get("status"), record.get("score"), auto)
        if outcome is None:
            return
        key = (str(record.get("dataset") or ""), str(record.get("eval_id")), str(record["target"]))
        repeat = record.get("repeat")
        self.runs.setdefault(key, {})[repeat if isinstance(repeat, int) else 0] = outcome

    def verdicts(self) -> dict[CaseKey, Verdict]:
        """Where every case's verdict stands."""
        return {key: verdict(runs.values(), self.rule) for key, runs in self.runs.items()}

    # --- the rounds ---------------------------------------------------------------------

    def tag(self, job: CaseJob, reason: str) -> CaseJob:
        """``job`` with its record's ``auto_repeat``."""
        threshold = job.pass_threshold
        if threshold is None:
            threshold = self.plan.pass_threshold
        job.auto = {**self.rule.to_dict(), "threshold": threshold, "reason": reason}
        return job

    def first_round(self, lanes: list[Lane]) -> list[Lane]:
        """The plan's lanes, each job marked as a first run (on resume: a run made again)."""
        self.counts.rounds = 1

        def tagged(lane: Lane) -> Iterator[CaseJob | InvalidJob]:
            for job in lane.jobs():
                if isinstance(job, CaseJob):
                    self.tag(job, FIRST_RUN if job.repeat == 0 else RUN_AGAIN)
                yield job

        return [
            lane if lane.target is None else replace(lane, source=lambda lane=lane: tagged(lane))
            for lane in lanes
        ]

    def next_round(self) -> list[Lane] | None:
        """The next round's lanes: one more run of each case that wants one, the most
        unsettled first; None when no case does, or the budget refused a request."""
        if self.meter is not None and self.meter().stopped:
            return None
        wanted = sorted(
            ((key, found) for key, found in self.verdicts().items() if found.wants_more),
            key=unsettled_first,
        )
        if not wanted:
            return None
        picked = {
            (dataset, case, self._configured.get(target, target)): frozenset(
                {_next_repeat(self.runs[(dataset, case, target)])}
            )
            for (dataset, case, target), _ in wanted
        }
        rank = {key: (i, found) for i, (key, found) in enumerate(wanted)}
        plan = replace(self.plan, rerun=picked, resume=None, auto_resume=False)
        lanes: list[Lane] = []
        count = 0
        for lane in plan.lanes():
            if lane.target is None:
                continue  # a case that cannot run was never graded: it has no verdict
            jobs = [job for job in lane.jobs() if _key(job) in rank]  # type: ignore[arg-type]
            jobs.sort(key=lambda job: rank[_key(job)][0])  # type: ignore[arg-type]
            for job in jobs:
                assert isinstance(job, CaseJob)
                self.tag(job, rank[_key(job)][1].reason())
            if jobs:
                count += len(jobs)
                lanes.append(replace(lane, source=lambda jobs=jobs: iter(jobs)))
        if not lanes:
            return None
        self.counts.rounds += 1
        self.counts.extra_runs += count
        self.counts.last = count
        return lanes


def _key(job: CaseJob | InvalidJob) -> CaseKey | None:
    """A job's case, as its record names it (None: a case that cannot run)."""
    if not isinstance(job, CaseJob):
        return None
    return (job.case.dataset, job.case.id, job.target.name)


def _next_repeat(runs: Mapping[int, Outcome]) -> int:
    """The first repeat the case has no run of."""
    repeat = 0
    while repeat in runs:
        repeat += 1
    return repeat


def _outcome(status: Any, score: Any, auto: Any) -> Outcome | None:
    """A run as its verdict counts it, from its record (None: not a run of
    ``--repeat auto``, or a ``skipped`` one: not run)."""
    if not isinstance(auto, Mapping) or not isinstance(status, str) or status == "skipped":
        return None
    threshold = auto.get("threshold")
    if not isinstance(threshold, int | float) or isinstance(threshold, bool):
        return None
    number = float(score) if isinstance(score, int | float) else 0.0
    return Outcome(status, number, float(threshold))


def file_rule(state: ResultsState) -> AutoRule | None:
    """The rule a results file's ``--repeat auto`` runs were made with (its latest
    record's that names one); None when none was."""
    found = None
    for previous in state.runs.values():
        if isinstance(previous.auto, Mapping):
            rule = AutoRule.from_record(previous.auto)
            if rule is not None:
                found = rule
    return found
