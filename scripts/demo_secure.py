"""The demo's secure step: ``tiered-cluster up --secure`` (TLS, authenticated principals, the
authorizer), a principal with AlterConfigs but without Delete on a tiered topic refused a
delete-policy disable (TOPIC_AUTHORIZATION_FAILED, the topic unchanged), then granted Delete and
the disable goes through."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from demo_output import explain, say
from demo_topics import Topic

TOPIC = "payments"
USER = "alice"
PRINCIPAL = f"User:CN={USER},OU=users,O=tiered"
DISABLE = "remote.log.disable.policy=delete,remote.storage.enable=false"
# The CLI of ACLs as installed or not yet (``tiered-acls`` is new in pyproject.toml's scripts).
ACLS = ["tiered-acls"] if shutil.which("tiered-acls") else ["python", "-m", "cli.acls"]
ISSUE_SCRIPT = Path(__file__).resolve().parent / "demo_issue_certificate.py"


class Runner(Protocol):
    def __call__(
        self,
        args: Sequence[str],
        *,
        heredoc: str | None = ...,
        expect: int = ...,
        capture: bool = ...,
        quiet: bool = ...,
    ) -> str: ...


class SecureStep:
    """Runs the step with the demo's ``run`` (which prints each command) and ``check``."""

    def __init__(self, data_dir: Path, run: Runner, check: Callable[[bool, str], None]) -> None:
        self.dir = data_dir
        self.config = data_dir / "config"
        self.run = run
        self.check = check
        self.bootstrap = ""
        self.touched = False

    def as_(self, who: str, command: str | list[str], *args: str) -> list[str]:
        config = self.config / f"{who}.properties"
        program = [command] if isinstance(command, str) else command
        return [*program, "--bootstrap-server", self.bootstrap, "--command-config", str(config),
                *args]  # fmt: skip

    def describe(self) -> Topic:
        out = self.run(
            self.as_("admin", "tiered-topics", "--describe", "--topic", TOPIC, "--format", "json"),
            quiet=True,
        )
        return Topic.from_json(json.loads(out)[0])

    def grant(self, *operations: str) -> None:
        flags = [flag for operation in operations for flag in ("--operation", operation)]
        self.run(self.as_("admin", ACLS, "--add", "--allow-principal", PRINCIPAL,
                          *flags, "--topic", TOPIC))  # fmt: skip

    def main(self) -> None:
        explain(
            "Secure: a second cluster with TLS on every listener, authenticated principals and "
            "the authorizer.",
            f"up --secure writes a CA, a certificate per process and for the admin, and "
            f"{self.config}/admin.properties",
            "(for --command-config); the brokers' Kafka listeners are SASL_SSL (SCRAM) and SSL.",
        )
        self.touched = True
        out = self.run(
            ["tiered-cluster", "up", "--data-dir", str(self.dir), "--secure", "--brokers", "1"],
            capture=True,
        )
        self.bootstrap = out.strip().splitlines()[-1]
        self.run(self.as_("admin", "tiered-topics", "--create", "--topic", TOPIC, "--partitions",
                          "1", "--config", "remote.storage.enable=true"))  # fmt: skip

        explain(
            f"A certificate for {USER} from the cluster CA, and ACLs that let {USER} alter the "
            "topic's configs, but not delete its data."
        )
        self.run(["python", "-", str(self.config), USER], heredoc=ISSUE_SCRIPT.read_text())
        self.grant("AlterConfigs", "Describe")

        explain(
            f"{USER} turns tiered storage off with the delete policy: refused, it needs Delete on "
            "the topic too."
        )
        refused = self.run(
            self.as_(USER, "tiered-configs", "--alter", "--entity-type", "topics",
                     "--entity-name", TOPIC, "--add-config", DISABLE),
            expect=1,
            capture=True,
        )  # fmt: skip
        self.check(
            "TOPIC_AUTHORIZATION_FAILED" in refused,
            f"{USER}'s disable was not refused with TOPIC_AUTHORIZATION_FAILED",
        )
        unchanged = self.describe()
        self.check(
            (unchanged.tiered_state, unchanged.tiered_epoch) == ("ENABLED", 0),
            f"after the refusal: {unchanged.tiered_state} at epoch {unchanged.tiered_epoch}",
        )
        say(f"  {TOPIC}: still ENABLED at tiered epoch 0")

        explain(f"Grant {USER} Delete on the topic: the same disable goes through.")
        self.grant("Delete")
        self.run(
            self.as_(USER, "tiered-configs", "--alter", "--entity-type", "topics",
                     "--entity-name", TOPIC, "--add-config", DISABLE, "--wait"),
        )  # fmt: skip
        disabled = self.describe()
        self.check(
            (disabled.tiered_state, disabled.tiered_epoch) == ("DISABLED", 1),
            f"after the grant: {disabled.tiered_state} at epoch {disabled.tiered_epoch}",
        )

        explain("Stop the secure cluster.")
        self.down()

    def down(self) -> None:
        self.touched = False
        self.run(["tiered-cluster", "down", "--data-dir", str(self.dir)])
