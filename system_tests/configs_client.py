"""One operator's shell loop of ``tiered-configs --alter`` calls, as one process: reads
``TOPIC<TAB>KEY=VALUE,...`` lines on stdin and runs the CLI's ``main`` for each in turn, so a
client pays the interpreter's start-up once rather than once per topic. Prints
``FAILED TOPIC EXIT_CODE`` for each call that did not exit 0 (the CLI's own message is on
stderr) and exits 1 if any did.

    python -m system_tests.configs_client BOOTSTRAP < alterations
"""

from __future__ import annotations

import sys

from cli import configs


def main(argv: list[str]) -> int:
    (bootstrap,) = argv
    failed = 0
    for line in sys.stdin:
        topic, _, add = line.rstrip("\n").partition("\t")
        code = configs.main(
            [
                "--bootstrap-server",
                bootstrap,
                "--alter",
                "--entity-type",
                "topics",
                "--entity-name",
                topic,
                "--add-config",
                add,
            ]
        )
        if code != 0:
            failed += 1
            print(f"FAILED {topic} {code}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
