"""S3 remote storage against a real moto server over HTTP, directly and through the fault proxy:
configuration and credentials (never shown), and the one retry policy of fetches, copies and
DeleteObjects requests."""

from __future__ import annotations

import itertools
import logging
import pickle
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from broker import main as broker_main
from broker.kafka.config_entries import broker_entries
from cli.launch.ports import free_port
from controller import main as controller_main
from tests.support.remote_tree import TOPIC, build_tree
from tests.support.s3 import TEST_CREDENTIALS, S3Store
from tests.support.s3_fault_proxy import FaultPlan, S3FaultProxy
from tests.tiered.rsm.test_rsm_fsspec import LOG, TP, segment_data, segment_meta
from tiered import rsm
from tiered.api import DeleteOutcome, RemoteStorageException, TopicIdPartition
from tiered.rsm import (
    FsspecRemoteStorageManager,
    S3Credentials,
    S3ObjectDeleter,
    fsspec_rsm,
    layout,
)

pytestmark = pytest.mark.s3

ACCESS_KEY = TEST_CREDENTIALS.access_key_id
SECRET = TEST_CREDENTIALS.secret_access_key
CREDENTIALS_FILE = "remote.storage.s3.credentials.file"
EXECUTOR_CREDENTIALS_FILE = "remote.storage.s3.executor.credentials.file"


def storage_of(config: dict[str, str]) -> FsspecRemoteStorageManager:
    storage = rsm.create(config)
    assert isinstance(storage, FsspecRemoteStorageManager)
    return storage


def s3_deleter(storage: FsspecRemoteStorageManager) -> S3ObjectDeleter:
    deleter = storage.object_deleter()
    assert isinstance(deleter, S3ObjectDeleter)
    return deleter


# -- credentials ---------------------------------------------------------------------------------


def test_credentials_of_the_file_sign_every_request_and_a_pickled_deleter_reads_its_own_file(
    s3_store: S3Store, s3_proxy: S3FaultProxy, tmp_path: Path
) -> None:
    executor_file = _credentials_file(
        tmp_path,
        f"[default]\naws_access_key_id = AKIAEXECUTORHOST\naws_secret_access_key = x{SECRET}\n",
    )
    config = s3_store.config(s3_proxy.url, **{EXECUTOR_CREDENTIALS_FILE: executor_file})
    storage = storage_of(config)
    meta = segment_meta()
    storage.copy_log_segment_data(meta, segment_data(tmp_path))
    assert storage.fetch_log_segment(meta, 0) == LOG
    assert set(s3_proxy.access_key_ids) == {ACCESS_KEY}
    shipped = pickle.dumps(storage.object_deleter())
    assert SECRET.encode() not in shipped and ACCESS_KEY.encode() not in shipped
    keys = storage.object_keys(TP)
    s3_store.credentials_file.unlink()  # an executor's host holds its own file, not this one
    s3_proxy.reset_counts()
    outcome = pickle.loads(shipped).delete_objects(keys)
    assert outcome == DeleteOutcome(6)
    assert s3_store.keys() == set()
    assert s3_proxy.requests["DeleteObjects"] == 1
    assert set(s3_proxy.access_key_ids) == {"AKIAEXECUTORHOST"}


def test_an_executor_without_its_credentials_file_fails_naming_the_key(
    s3_store: S3Store, tmp_path: Path
) -> None:
    shipped = pickle.dumps(storage_of(s3_store.config()).object_deleter())
    s3_store.credentials_file.unlink()
    with pytest.raises(RemoteStorageException, match=r"remote\.storage\.s3\.credentials\.file"):
        pickle.loads(shipped).delete_objects(["a"])


def test_a_profile_of_the_credentials_file(
    s3_store: S3Store, s3_proxy: S3FaultProxy, tmp_path: Path
) -> None:
    path = tmp_path / "several"
    path.write_text(
        "[default]\naws_access_key_id = AKIADEFAULTPROFILE\naws_secret_access_key = d\n\n"
        f"[tiered]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET}\n",
        encoding="utf-8",
    )
    config = s3_store.config(s3_proxy.url, **{CREDENTIALS_FILE: str(path)})
    config["remote.storage.s3.credentials.profile"] = "tiered"
    assert storage_of(config).list_tiered_epochs(TP) == []
    assert set(s3_proxy.access_key_ids) == {ACCESS_KEY}


def test_environment_credentials_when_no_file_is_given(
    s3_store: S3Store, s3_proxy: S3FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFROMTHEENVIRONMENT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-of-the-environment")
    config = s3_store.config(s3_proxy.url)
    del config[CREDENTIALS_FILE]
    storage = storage_of(config)
    assert "secret-of-the-environment" not in repr(storage.object_deleter())
    shipped = pickle.dumps(storage.object_deleter())
    assert b"secret-of-the-environment" not in shipped
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXECUTORENVIRONMENT")  # where it is unpickled
    assert storage.list_tiered_epochs(TP) == []  # read once, where the storage was configured
    assert pickle.loads(shipped).delete_objects(["a"]).done == 1
    assert list(s3_proxy.access_key_ids) == ["AKIAFROMTHEENVIRONMENT", "AKIAEXECUTORENVIRONMENT"]


def _credentials_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "credentials"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("change", "key", "reason"),
    [
        ({"remote.storage.root": "s3://"}, "remote.storage.root", "no bucket"),
        ({"remote.storage.root": "s3:///prefix"}, "remote.storage.root", "no bucket"),
        ({"remote.storage.root": "s3://Bad_Bucket/x"}, "remote.storage.root", "bucket name"),
        (
            {"remote.storage.root": f"s3://{ACCESS_KEY}:{SECRET}@bucket/x"},
            "remote.storage.root",
            "must not carry credentials",
        ),
        ({"remote.storage.s3.endpoint.url": "localhost:9000"}, "endpoint.url", "http://HOST"),
        ({"remote.storage.s3.region": "US East"}, "remote.storage.s3.region", "us-east-1"),
        ({CREDENTIALS_FILE: "/no/such/file"}, CREDENTIALS_FILE, "can not be read"),
        ({"remote.storage.s3.connect.timeout.ms": "0"}, "connect.timeout.ms", ">= 1"),
        ({"remote.storage.s3.request.timeout.ms": "soon"}, "request.timeout.ms", ">= 1"),
        ({"remote.storage.retry.max.attempts": "0"}, "retry.max.attempts", ">= 1"),
        (
            {"remote.storage.retry.backoff.ms": "500", "remote.storage.retry.backoff.max.ms": "5"},
            "remote.storage.retry.backoff.max.ms",
            "backoff.ms",
        ),
    ],
)
def test_bad_settings_name_the_key(
    s3_store: S3Store, change: dict[str, str], key: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=r"\.".join(key.split("."))) as info:
        rsm.create({**s3_store.config(), **change})
    assert reason in str(info.value)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"aws_secret_access_key = {SECRET}\n", "not an AWS shared-credentials file"),
        (f"[default]\naws_secret_access_key = {SECRET}\n", "lacks aws_access_key_id"),
        (f"[default]\naws_access_key_id = {ACCESS_KEY}\n", "lacks aws_secret_access_key"),
        (f"[other]\naws_access_key_id = {ACCESS_KEY}\n", "no [default] section"),
        (f"[default]\naws_secret_access_key {SECRET}\n", "not an AWS shared-credentials file"),
    ],
)
def test_a_bad_credentials_file_is_named_and_never_quoted(
    s3_store: S3Store, tmp_path: Path, text: str, reason: str
) -> None:
    path = _credentials_file(tmp_path, text)
    with pytest.raises(ValueError, match=r"remote\.storage\.s3\.credentials\.file") as info:
        rsm.create(s3_store.config(**{CREDENTIALS_FILE: path}))
    assert reason in str(info.value)
    assert path in str(info.value)
    assert SECRET not in str(info.value) and info.value.__cause__ is None


def test_half_the_environment_pair_is_named(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    config = s3_store.config()
    del config[CREDENTIALS_FILE]
    with pytest.raises(ValueError, match="AWS_ACCESS_KEY_ID") as info:
        rsm.create(config)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("daemon", ["controller", "broker"])
def test_a_daemon_refuses_a_bad_credentials_file_as_invalid_config(
    s3_store: S3Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], daemon: str
) -> None:
    credentials = _credentials_file(tmp_path, f"[default]\naws_secret_access_key={SECRET}\n")
    properties = tmp_path / f"{daemon}.properties"
    own = {
        "controller": {"node.id": "100", "metadata.log.dir": str(tmp_path / "metadata")},
        "broker": {"node.id": "1", "log.dirs": str(tmp_path / "logs")},
    }[daemon]
    lines = {
        **own,
        "listeners": f"127.0.0.1:{free_port()}",
        **s3_store.config(**{CREDENTIALS_FILE: credentials}),
    }
    properties.write_text("".join(f"{k}={v}\n" for k, v in lines.items()), encoding="utf-8")
    main = controller_main.main if daemon == "controller" else broker_main.main
    assert main(["--config", str(properties)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("INVALID_CONFIG: ")
    assert CREDENTIALS_FILE in err and "lacks aws_access_key_id" in err
    assert SECRET not in err


def test_credentials_never_in_a_repr_a_log_line_or_an_error(
    s3_store: S3Store, s3_proxy: S3FaultProxy, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, botocore's and s3fs's included
    storage = storage_of(
        s3_store.config(s3_proxy.url, **{"remote.storage.retry.max.attempts": "3"})
    )
    meta = segment_meta()
    storage.copy_log_segment_data(meta, segment_data(tmp_path))
    deleter = s3_deleter(storage)
    keys = storage.object_keys(TP)
    s3_proxy.set_plan(FaultPlan(slow_down_rate=0.5, internal_error_rate=0.25, reset_rate=0.25))
    errors: list[str] = []
    with pytest.raises(RemoteStorageException) as fetch_error:
        storage.fetch_log_segment(meta, 0)
    errors += [str(fetch_error.value), repr(fetch_error.value.__cause__)]
    with pytest.raises(RemoteStorageException) as copy_error:
        storage.copy_log_segment_data(segment_meta(start_offset=500), segment_data(tmp_path))
    errors.append(str(copy_error.value))
    outcome = deleter.delete_objects(keys)
    assert outcome.failed > 0 and outcome.first_error is not None
    errors.append(outcome.first_error)
    shown = [
        *errors,
        repr(storage),
        repr(deleter),
        str(deleter),
        repr(deleter.settings),
        repr(deleter.settings.credentials),
    ]
    logged = [record.getMessage() for record in caplog.records]
    assert all(SECRET not in text for text in shown + logged)
    assert all(ACCESS_KEY not in text for text in shown)
    assert all(
        ACCESS_KEY not in r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
    )
    assert repr(S3Credentials("a", "b", source="x")) == "S3Credentials(from x)"


def test_a_describe_of_the_broker_config_hides_the_credentials() -> None:
    properties = {
        "node.id": "1",
        "remote.storage.root": "s3://tiered/cluster",
        "remote.storage.s3.endpoint.url": "http://127.0.0.1:9000",
        CREDENTIALS_FILE: "/etc/tiered/s3-credentials",
        "remote.storage.s3.credentials.profile": "tiered",
        "rsm.config.s3.access.key": "AKIAPLUGINKEY",
        "rsm.config.s3.secret.key": "plugin-secret",
    }
    entries = {e.name: e for e in broker_entries(properties)}
    hidden = {
        CREDENTIALS_FILE,
        "remote.storage.s3.credentials.profile",
        "rsm.config.s3.access.key",
        "rsm.config.s3.secret.key",
    }
    assert {name for name, e in entries.items() if e.is_sensitive} == hidden
    assert all(entries[name].value is None for name in hidden)
    assert entries["remote.storage.s3.endpoint.url"].value == "http://127.0.0.1:9000"


# -- retries -------------------------------------------------------------------------------------


def test_the_policy_is_the_only_retry_loop(
    s3_store: S3Store, s3_proxy: S3FaultProxy, tmp_path: Path
) -> None:
    storage = storage_of(
        s3_store.config(s3_proxy.url, **{"remote.storage.retry.max.attempts": "3"})
    )
    meta = segment_meta()
    storage.copy_log_segment_data(meta, segment_data(tmp_path))
    s3_proxy.set_plan(FaultPlan(slow_down_rate=1.0, operations=frozenset({"GetObject"})))
    with pytest.raises(RemoteStorageException) as info:
        storage.fetch_log_segment(meta, 0)
    message = str(info.value)
    assert str(meta.remote_log_segment_id) in message and ".log" in message
    assert "after 3 attempts" in message and "SlowDown" in message
    assert s3_proxy.requests["GetObject"] == 3  # neither s3fs nor botocore retried on its own


def test_an_endpoint_that_stops_answering_fails_the_call_within_its_timeouts(
    s3_store: S3Store, s3_proxy: S3FaultProxy, tmp_path: Path
) -> None:
    # A partitioned endpoint sends no error: only the request timeout ends each attempt.
    storage = storage_of(
        s3_store.config(
            s3_proxy.url,
            **{
                "remote.storage.retry.max.attempts": "2",
                "remote.storage.s3.request.timeout.ms": "300",
            },
        )
    )
    meta = segment_meta()
    storage.copy_log_segment_data(meta, segment_data(tmp_path))
    s3_proxy.set_plan(FaultPlan(latency_s=5.0, operations=frozenset({"GetObject"})))
    started = time.monotonic()
    with pytest.raises(RemoteStorageException, match="after 2 attempts"):
        storage.fetch_log_segment(meta, 0)
    assert time.monotonic() - started < 4.0  # not the proxy's 5 s, let alone botocore's 60 s
    assert s3_proxy.requests["GetObject"] == 2


def test_an_upload_to_an_endpoint_that_stops_answering_fails_within_its_timeouts(
    s3_store: S3Store, tmp_path: Path
) -> None:
    """A listener that takes connections and never answers, as a partitioned endpoint: no
    upload waits for a 100 Continue that never comes."""
    silent = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.extend(iter(lambda: silent.accept()[0], None)),
                     daemon=True).start()  # fmt: skip
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    storage = storage_of(
        s3_store.config(
            url,
            **{
                "remote.storage.retry.max.attempts": "2",
                "remote.storage.s3.request.timeout.ms": "300",
            },
        )
    )
    started = time.monotonic()
    try:
        with pytest.raises(RemoteStorageException, match="copy of segment"):
            storage.copy_log_segment_data(segment_meta(), segment_data(tmp_path))
    finally:
        silent.close()
        for connection in accepted:
            connection.close()
    assert time.monotonic() - started < 10.0
    assert accepted  # it did reach the endpoint


def test_fetches_under_faults_return_the_right_bytes_or_a_clean_error(
    s3_store: S3Store, s3_proxy: S3FaultProxy, tmp_path: Path
) -> None:
    storage = storage_of(s3_store.config(s3_proxy.url))
    meta = segment_meta()
    storage.copy_log_segment_data(meta, segment_data(tmp_path))
    s3_proxy.set_plan(
        FaultPlan(
            slow_down_rate=0.2,
            internal_error_rate=0.1,
            reset_rate=0.1,
            latency_s=0.002,
            operations=frozenset({"GetObject"}),
        )
    )
    answered = 0
    for start, length in itertools.product((0, 1, 500, 1023), (1, 7, 600)):
        end = start + length - 1
        try:
            data = storage.fetch_log_segment(meta, start, end)
        except RemoteStorageException as e:
            assert ".log" in str(e) and "attempts" in str(e)
            continue
        assert data == LOG[start : end + 1]
        answered += 1
    assert answered > 0
    assert s3_proxy.injected["SlowDown"] and s3_proxy.injected["reset"]


def test_a_copy_that_gives_up_removes_what_it_stored(
    s3_store: S3Store, s3_proxy: S3FaultProxy, tmp_path: Path
) -> None:
    storage = storage_of(
        s3_store.config(s3_proxy.url, **{"remote.storage.retry.max.attempts": "3"})
    )
    kept = segment_meta(start_offset=0)
    storage.copy_log_segment_data(kept, segment_data(tmp_path))
    stored_before = s3_store.keys()
    # Every upload reaches the store and then loses its connection: stored, but never confirmed.
    s3_proxy.set_plan(FaultPlan(reset_rate=1.0, operations=frozenset({"PutObject"})))
    meta = segment_meta(start_offset=100)
    with pytest.raises(RemoteStorageException) as info:
        storage.copy_log_segment_data(meta, segment_data(tmp_path))
    assert str(meta.remote_log_segment_id) in str(info.value)
    assert "after 3 attempts" in str(info.value)
    assert s3_proxy.requests["PutObject"] >= 3  # aiohttp resends a PUT whose connection broke
    assert s3_store.keys() == stored_before  # the failed copy's object is gone again
    # Throttled to the end: the error names the segment, the object and S3's last answer.
    s3_proxy.set_plan(FaultPlan(slow_down_rate=1.0, operations=frozenset({"PutObject"})))
    with pytest.raises(RemoteStorageException) as info:
        storage.copy_log_segment_data(meta, segment_data(tmp_path))
    message = str(info.value)
    assert (
        str(meta.remote_log_segment_id) in message
        and f"{layout.segment_prefix(meta)}.index" in message
    )
    assert "after 3 attempts: SlowDown (HTTP 503)" in message
    assert s3_store.keys() == stored_before


def test_delete_requests_carry_at_most_1000_keys(s3_store: S3Store, s3_proxy: S3FaultProxy) -> None:
    deleter = s3_deleter(storage_of(s3_store.config(s3_proxy.url)))
    real = [f"t-{uuid.uuid4()}/0/te=0/{n:020d}-x.log" for n in range(5)]
    s3_store.write_many(dict.fromkeys(real, b"x"))
    handles = real + [f"t/0/te=0/{n:020d}-gone.log" for n in range(2495)]
    outcome = deleter.delete_objects(handles)
    assert outcome.done == 2500 and outcome.failed == 0
    assert sorted(len(r.keys) for r in s3_proxy.delete_requests) == [500, 1000, 1000]
    assert s3_store.keys() == set()


def test_per_key_errors_are_retried_alone(s3_store: S3Store, s3_proxy: S3FaultProxy) -> None:
    storage = storage_of(s3_store.config(s3_proxy.url, **{"remote.storage.delete.threads": "1"}))
    handles = [f"t-{uuid.uuid4()}/0/te=0/{n:020d}-x.log" for n in range(60)]
    s3_store.write_many(dict.fromkeys(handles, b"x"))
    s3_proxy.set_plan(FaultPlan(delete_key_error_rate=0.3))
    assert s3_deleter(storage).delete_objects(handles) == DeleteOutcome(60)
    requests = s3_proxy.delete_requests
    assert len(requests) >= 2 and not requests[-1].failed_keys
    assert requests[0].keys == tuple(f"{s3_store.prefix}/{h}" for h in handles)
    for previous, following in itertools.pairwise(requests):
        assert following.keys == previous.failed_keys  # only the keys that failed, again
    assert s3_store.keys() == set()


def test_whole_requests_throttled_are_sent_again_whole(
    s3_store: S3Store, s3_proxy: S3FaultProxy
) -> None:
    storage = storage_of(s3_store.config(s3_proxy.url, **{"remote.storage.delete.threads": "1"}))
    handles = [f"t-{uuid.uuid4()}/0/te=0/{n:020d}-x.log" for n in range(20)]
    s3_store.write_many(dict.fromkeys(handles, b"x"))
    s3_proxy.inject_next("SlowDown", "InternalError", "reset", "SlowDown")
    assert s3_deleter(storage).delete_objects(handles) == DeleteOutcome(20)
    requests = s3_proxy.delete_requests
    assert [r.fault for r in requests] == ["SlowDown", "InternalError", "reset", "SlowDown", None]
    assert all(r.keys == requests[0].keys for r in requests)
    assert s3_store.keys() == set()


def test_a_key_denied_is_reported_and_not_retried(
    s3_store: S3Store, s3_proxy: S3FaultProxy
) -> None:
    storage = storage_of(s3_store.config(s3_proxy.url))
    handles = [f"t-{uuid.uuid4()}/0/te=0/{n:020d}-x.log" for n in range(30)]
    s3_store.write_many(dict.fromkeys(handles, b"x"))
    s3_proxy.set_plan(FaultPlan(delete_key_error_rate=0.2, delete_key_error_code="AccessDenied"))
    outcome = s3_deleter(storage).delete_objects(handles)
    [request] = s3_proxy.delete_requests
    denied = {key.removeprefix(f"{s3_store.prefix}/") for key in request.failed_keys}
    assert denied and set(outcome.failed_handles) == denied
    assert outcome.deleted == 30 - len(denied)
    assert outcome.first_error is not None and "AccessDenied" in outcome.first_error
    assert s3_store.keys() == denied


def test_a_deleter_that_gives_up_reports_every_key_still_there(
    s3_store: S3Store, s3_proxy: S3FaultProxy
) -> None:
    config = s3_store.config(s3_proxy.url, **{"remote.storage.retry.max.attempts": "4"})
    handles = [f"t-{uuid.uuid4()}/0/te=0/{n:020d}-x.log" for n in range(10)]
    s3_store.write_many(dict.fromkeys(handles, b"x"))
    s3_proxy.set_plan(FaultPlan(slow_down_rate=1.0))
    outcome = s3_deleter(storage_of(config)).delete_objects(handles)
    assert sorted(outcome.failed_handles) == sorted(handles) and outcome.done == 0
    assert outcome.first_error is not None and "SlowDown" in outcome.first_error
    assert s3_proxy.requests["DeleteObjects"] == 4
    assert s3_store.keys() == set(handles)


def test_listings_follow_every_page(
    s3_store: S3Store, s3_proxy: S3FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fsspec_rsm, "LIST_BATCH_SIZE", 7)
    topic_id = uuid.uuid4()
    keys = build_tree(s3_store, topic_id, partitions=(0,), epochs=(0, 1, 2), segments=4)
    storage = storage_of(s3_store.config(s3_proxy.url))
    s3_proxy.set_plan(FaultPlan(list_page_size=3, slow_down_rate=0.2))
    tp = TopicIdPartition(topic_id, TOPIC, 0)
    assert storage.list_tiered_epochs(tp) == [0, 1, 2]
    batches = list(storage.list_objects_below_epoch(tp, 2))
    assert [len(b) for b in batches] == [7, 7, 2, 7, 7, 2]  # 16 objects an epoch
    assert [h for b in batches for h in b] == sorted(keys[(0, 0)]) + sorted(keys[(0, 1)])
    assert s3_proxy.requests["ListObjectsV2"] >= 2 * 16 // 3  # pages of 3 keys
