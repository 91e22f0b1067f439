"""The publish function of the relay program's test: one JSON line per
message, in the file $PUBLISHED."""
import json
import os

from pg_idempotency.relay import Message


def publish(message: Message) -> None:
    with open(os.environ["PUBLISHED"], "a") as f:
        f.write(json.dumps({"message_id": message.message_id, "topic": message.topic,
                            "payload": message.payload}) + "\n")
