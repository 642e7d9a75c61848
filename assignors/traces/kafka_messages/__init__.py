"""ConsumerGroupDescribe (API key 69, KIP-848) as kafka-python message classes.

kafka-python builds its request and response classes from Kafka's JSON message schemas but
ships none for ConsumerGroupDescribe; these two files hold its version 0 fields as Kafka's
``ConsumerGroupDescribeRequest.json`` and ``ConsumerGroupDescribeResponse.json`` define them,
and kafka-python's own schema reader turns them into classes that encode and decode.
"""

from __future__ import annotations

import sys

from kafka.protocol.api_message import ApiMessage

_HERE = sys.modules[__name__]


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE):  # type: ignore[call-arg]
    pass


__all__ = ["ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"]
