"""AlterUserScramCredentials and DescribeUserScramCredentials, forwarded to the active
controller (``controller.scram_users`` judges them, as Kafka's ScramControlManager does).

The Kafka client salted the password: the request carries salt, salted password and iterations,
which go on to the controller as they are. A failure reaching the controller answers every user
named with that error; a describe reports it at the message level, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i8, i32
from kio.static.protocol import ResponsePayload

from broker.admin_forwarder import ControllerAdmin
from broker.kafka.convert import NO_THROTTLE, kafka_error
from broker.listener.handler import RequestContext
from tiered.errors import TieredError
from tiered.kafka.messages import build, nested, response_type_for
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = ["ScramApi"]


class ScramApi:
    def __init__(self, controller: ControllerAdmin) -> None:
        self._controller = controller

    def alter_user_scram_credentials(
        self, request: Any, context: RequestContext
    ) -> ResponsePayload:
        response_type = response_type_for(request)
        forwarded = pb.AlterUserScramCredentialsRequest(
            deletions=[
                pb.ScramCredentialDeletion(name=d.name, mechanism=int(d.mechanism))
                for d in request.deletions
            ],
            upsertions=[
                pb.ScramCredentialUpsertion(
                    name=u.name,
                    mechanism=int(u.mechanism),
                    iterations=int(u.iterations),
                    salt=bytes(u.salt),
                    salted_password=bytes(u.salted_password),
                )
                for u in request.upsertions
            ],
        )
        users = list(
            dict.fromkeys(
                [*(d.name for d in forwarded.deletions), *(u.name for u in forwarded.upsertions)]
            )
        )
        try:
            response = self._controller.call(
                "AlterUserScramCredentials", forwarded, pb.AlterUserScramCredentialsResponse
            )
            failure = error_from_proto(response.error)
            outcomes = (
                [(user, failure) for user in users]
                if failure is not None
                else [(r.user, error_from_proto(r.error)) for r in response.results]
            )
        except TieredError as e:
            outcomes = [(user, e) for user in users]
        result_type = nested(response_type, "AlterUserScramCredentialsResult")
        results = []
        for user, error in outcomes:
            code, message = kafka_error(error)
            results.append(build(result_type, user=user, error_code=code, error_message=message))
        return build(response_type, throttle_time=NO_THROTTLE, results=tuple(results))

    def describe_user_scram_credentials(
        self, request: Any, context: RequestContext
    ) -> ResponsePayload:
        response_type = response_type_for(request)
        users = [u.name for u in request.users or ()]
        try:
            response = self._controller.call(
                "DescribeUserScramCredentials",
                pb.DescribeUserScramCredentialsRequest(users=users),
                pb.DescribeUserScramCredentialsResponse,
            )
            failure = error_from_proto(response.error)
        except TieredError as e:
            failure = e
        if failure is not None:
            code, message = kafka_error(failure)
            return build(
                response_type,
                throttle_time=NO_THROTTLE,
                error_code=code,
                error_message=message,
                results=(),
            )
        result_type = nested(response_type, "DescribeUserScramCredentialsResult")
        info_type = nested(response_type, "CredentialInfo")
        results = []
        for result in response.results:
            code, message = kafka_error(error_from_proto(result.error))
            results.append(
                build(
                    result_type,
                    user=result.user,
                    error_code=code,
                    error_message=message,
                    credential_infos=tuple(
                        build(info_type, mechanism=i8(c.mechanism), iterations=i32(c.iterations))
                        for c in result.credentials
                    ),
                )
            )
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=KafkaErrorCode.none,
            error_message=None,
            results=tuple(results),
        )
