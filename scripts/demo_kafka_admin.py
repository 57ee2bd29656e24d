import sys
import time

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

admin = AdminClient({"bootstrap.servers": sys.argv[1]})
off = ConfigResource(
    "topic",
    "orders",
    incremental_configs=[
        ConfigEntry(
            "remote.log.disable.policy", "retain", incremental_operation=AlterConfigOpType.SET
        ),
        ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET),
    ],
)
admin.incremental_alter_configs([off])[off].result(30)
print("IncrementalAlterConfigs: done")

keys = ("remote.storage.enable", "remote.log.tiered.state", "remote.log.tiered.epoch")
shown, deadline = "", time.monotonic() + 60
while "DISABLED" not in shown and time.monotonic() < deadline:
    topic = ConfigResource("topic", "orders")
    configs = admin.describe_configs([topic])[topic].result(30)
    line = " ".join(f"{key}={configs[key].value}" for key in keys)
    if line != shown:
        print("DescribeConfigs:", line)
        shown = line
    time.sleep(0.1)
