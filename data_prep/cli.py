"""The command line every source module shares.

python -m data_prep.<source> --input PATH --output_dir DIR [--seed 0] [--val_ratio 0.0] [--dedup exact]
    [--decontaminate_with bfcl tau2=/path/to/tasks.json] [--decontam_ngram 13] [--system_prompt hermes]
    [--name NAME] [--split_name train] [--max_records N] [--no_progress]
"""

from __future__ import annotations

import argparse
import logging
from typing import Any, Callable, Sequence

from data_prep.conversion_report import Report
from data_prep.decontam import parse_decontam_spec
from data_prep.pipeline import ConvertFn, Options, run
from data_prep.readers import InputError, read_records
from data_prep.row_builder import SYSTEM_PROMPT_STYLES

logger = logging.getLogger(__name__)

__all__ = ["build_parser", "options_from_args", "main_for"]


def build_parser(
    source: str,
    description: str,
    split_name: str = "train",
    val_ratio: float = 0.0,
    input_required: bool = True,
    dedup: str = "exact",
) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m data_prep.{source}", description=description)
    p.add_argument("--input", required=input_required, help="local file (.parquet/.json/.jsonl) or folder")
    p.add_argument("--output_dir", required=True, help="where <name>_<split>.parquet and <name>_report.json go")
    p.add_argument("--name", default=source, help=f"file name prefix (default {source})")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/val split")
    p.add_argument("--val_ratio", type=float, default=val_ratio, help="fraction of source records for validation")
    p.add_argument("--split_name", default=split_name, help="name of the main split")
    p.add_argument(
        "--dedup",
        choices=["exact", "question", "none"],
        default=dedup,
        help="exact: same prompt+tools+gold; question: same normalised question and tool names",
    )
    p.add_argument(
        "--decontaminate_with",
        nargs="*",
        default=[],
        metavar="SOURCE",
        help="drop rows whose question matches: 'bfcl' (bfcl-eval's data), 'tau2=/path/tasks.json'",
    )
    p.add_argument(
        "--decontam_ngram",
        type=int,
        default=13,
        help="also drop rows sharing this many consecutive words with a reference (0: exact only)",
    )
    p.add_argument(
        "--system_prompt",
        choices=SYSTEM_PROMPT_STYLES,
        default="hermes",
        help="hermes: system message listing the tools (authors' rows); none: rely on tools=",
    )
    p.add_argument("--max_records", type=int, default=-1, help="read only the first N records (debugging)")
    p.add_argument("--no_progress", action="store_true", help="no progress bar")
    p.add_argument("--log_level", default="INFO")
    return p


def options_from_args(args: argparse.Namespace) -> Options:
    return Options(
        output_dir=args.output_dir,
        name=args.name,
        seed=args.seed,
        val_ratio=args.val_ratio,
        split_name=args.split_name,
        dedup=args.dedup,
        decontaminate_with=parse_decontam_spec(args.decontaminate_with),
        decontam_ngram=args.decontam_ngram,
        system_prompt=args.system_prompt,
        progress=not args.no_progress,
        max_records=args.max_records,
    )


def main_for(
    source: str,
    description: str,
    make_convert: Callable[[argparse.Namespace], ConvertFn],
    argv: Sequence[str] | None = None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    load: Callable[[argparse.Namespace], tuple[list[Any], dict]] | None = None,
    **parser_defaults,
) -> Report:
    """Parse ``argv``, read the input, run the pipeline; returns the report (also written as JSON).

    An input that cannot be read at all (missing, not UTF-8, not JSON, a broken parquet) ends the run with exit
    status 2 and one line naming the file and where, as argparse does for bad arguments; a bad *record* never
    does (it is a counted rejection in the report).
    """
    parser = build_parser(source, description, **parser_defaults)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:  # configuration first: a bad reference file fails before any input is read
        opts = options_from_args(args)
    except (ValueError, OSError) as exc:  # unknown source, unreadable or non-JSON tasks file, no bfcl-eval
        parser.error(f"--decontaminate_with: {exc}")
    try:
        records, notes = load(args) if load is not None else (read_records(args.input), {})
    except (InputError, FileNotFoundError) as exc:
        logger.error("%s: cannot read the input: %s", source, exc)
        parser.exit(2, f"{parser.prog}: error: cannot read the input: {exc}\n")
    return run(source, str(args.input), records, make_convert(args), opts, notes=notes)


def simple_main(source: str, description: str, convert: ConvertFn, argv: Sequence[str] | None = None) -> Report:
    """The CLI of a source whose conversion takes no options of its own."""
    return main_for(source, description, lambda args: convert, argv)
