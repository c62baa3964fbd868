"""``RunStore``: a project's run store, opened."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from agentv.results.record import EvalResult
from agentv.store import calibrate as calibration
from agentv.store import history, records, reviews, runs
from agentv.store.db import connect
from agentv.store.index import Indexed


class RunStore:
    """A run store, opened (``create``: created when missing). Close it, or use it as a
    context manager. ``InputError`` when the file is not a store, ``SetupError`` when it
    cannot be opened."""

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = Path(path)
        self.db = connect(self.path, create=create)

    def close(self) -> None:
        """Close the store's connection."""
        self.db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- runs

    def start_run(self, start: runs.RunStart) -> int:
        """Register a run that starts (or the run its results file belongs to); its id."""
        return runs.start_run(self.db, start)

    def finish_run(self, run_id: int, *, interrupted: bool = False) -> Indexed | None:
        """Complete a run's entry: its results file indexed, its figures filled."""
        return runs.finish_run(self.db, run_id, interrupted=interrupted)

    def import_results(self, path: Path) -> tuple[int, bool, Indexed]:
        """Index a results file: (run id, whether the run is new, what was indexed)."""
        return runs.import_results(self.db, path)

    def runs(self, which: runs.RunFilter | None = None) -> list[runs.StoredRun]:
        """The runs, newest first."""
        return runs.list_runs(self.db, which)

    def run(self, run_id: int) -> runs.StoredRun | None:
        """One run by its id."""
        return runs.get_run(self.db, run_id)

    def summary(self, run_id: int) -> dict[str, object] | None:
        """A run's summary JSON (``Summary.to_dict`` less its lists of cases)."""
        return runs.run_summary(self.db, run_id)

    def trends(
        self, run_ids: Sequence[int] | None = None
    ) -> dict[tuple[str, str], list[runs.TrendPoint]]:
        """Per target and eval file, its figures run after run."""
        return runs.trends(self.db, run_ids=run_ids)

    # --- records

    def records(self, run_id: int, query: records.RecordQuery) -> records.RecordPage:
        """A page of a run's records."""
        return records.record_page(self.db, run_id, query)

    def facets(self, run_id: int) -> tuple[list[str], list[str]]:
        """The statuses and targets among a run's records."""
        return records.record_facets(self.db, run_id)

    def record(self, run_id: int, seq: int) -> tuple[records.RecordRow, EvalResult | None] | None:
        """A record's row and the record itself, read back from its results file (None
        when the file is missing or no longer holds it). None: no such record."""
        found = records.record_row(self.db, run_id, seq)
        run = self.run(run_id)
        if found is None or run is None:
            return None
        row, offset, size = found
        if run.missing or run.results_path is None:
            return row, None
        return row, records.load_record(Path(run.results_path), row, offset, size)

    def latest_seq(self, run_id: int, case_key: str, repeat: int) -> int | None:
        """The latest record of a run of a case in a store run."""
        return records.latest_seq(self.db, run_id, case_key, repeat)

    # --- cases

    def case_history(self, case_key: str) -> history.CaseHistory:
        """A case's runs across the store (``case_key``: its JSON text)."""
        return history.case_history(self.db, case_key)

    def flaky(self, run_id: int | None = None) -> list[history.FlakyCase]:
        """The flaky cases."""
        return history.flaky_cases(self.db, run_id=run_id)

    # --- reviews

    def review(
        self,
        run_id: int,
        case_key: str,
        repeat: int,
        *,
        verdict: str,
        reviewer: str,
        score: float | None = None,
        comment: str = "",
    ) -> reviews.Review:
        """Record a person's review of a run of a case."""
        return reviews.add_review(
            self.db,
            run_id,
            case_key,
            repeat,
            verdict=verdict,
            score=score,
            comment=comment,
            reviewer=reviewer,
        )

    def reviews_of(self, run_id: int, case_key: str, repeat: int) -> list[reviews.Review]:
        """A run of a case's reviews, the latest first."""
        return reviews.reviews_of(self.db, run_id, case_key, repeat)

    def labels(self, results: Iterable[Path]) -> dict[tuple[str, str, str, int], str]:
        """The people's verdicts of the runs recorded in these results files, by run."""
        return reviews.labels_of(self.db, results)

    def review_counts(self, run_id: int) -> reviews.ReviewCounts:
        """How many of a run's records were reviewed."""
        return reviews.review_counts(self.db, run_id)

    def export_reviews(self, run_id: int | None = None) -> Iterator[str]:
        """Every review as a line of JSON."""
        return reviews.export_reviews(self.db, run_id=run_id)

    def import_reviews(
        self, path: Path, lines: Iterable[str], *, reviewer: str | None = None
    ) -> reviews.ImportedReviews:
        """Add reviews from lines of JSON."""
        return reviews.import_reviews(self.db, path, lines, reviewer=reviewer)

    def queue(self, run_id: int | None = None, *, limit: int = 200) -> list[reviews.QueueItem]:
        """What is worth a person's look first."""
        return reviews.review_queue(self.db, run_id=run_id, limit=limit)

    def calibrate(self, run_id: int | None = None) -> calibration.Calibration:
        """Each evaluator's agreement with people."""
        return calibration.calibrate(self.db, run_id=run_id)
