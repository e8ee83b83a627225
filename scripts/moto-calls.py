#!/usr/bin/env python3
"""What moto's server spends on each DynamoDB call the dynamodb pair makes.

Sequential calls from boto3 (moto's own dependency: run it with the Python
that runs moto, e.g. /opt/idem-moto/bin/python) to the emulator on
127.0.0.1:4566, 400 of each, in a table of its own that is deleted after;
prints the wall time a call. The client's share is the same for every
call, so the differences are the emulator's. docs/benchmarks.md quotes it.
"""

import time
import uuid

import boto3

N = 400
ENDPOINT = "http://127.0.0.1:4566"


def main():
    d = boto3.client(
        "dynamodb",
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    table = "idem_moto_calls_" + uuid.uuid4().hex[:8]
    d.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "B"}],
        BillingMode="PAY_PER_REQUEST",
    )
    now = int(time.time() * 1e6)
    out = b"x" * 300

    def in_flight(key):
        return {
            "pk": {"B": key},
            "fp": {"B": b"f" * 32},
            "tok": {"N": str(now)},
            "st": {"S": "F"},
            "until": {"N": str(now + 10**7)},
            "traced": {"N": str(now + 10**7)},
            "fmt": {"N": "1"},
            "expires": {"N": str(now // 10**6 + 100)},
        }

    holder = {
        "ConditionExpression": "#tok = :tok AND #st = :inflight AND #until > :now",
    }
    holder_values = {":tok": {"N": str(now)}, ":inflight": {"S": "F"}, ":now": {"N": str(now)}}

    def run(name, call):
        start = time.perf_counter()
        for i in range(N):
            call(i)
        print(f"{name}: {1e6 * (time.perf_counter() - start) / N:.0f} us a call")

    try:
        run("PutItem (the least design's record)", lambda i: d.put_item(
            TableName=table, Item={"pk": {"B": b"a%d" % i}, "out": {"B": out}}))
        run("PutItem, attribute_not_exists(pk) (the least design's claim)", lambda i: d.put_item(
            TableName=table, Item={"pk": {"B": b"b%d" % i}},
            ConditionExpression="attribute_not_exists(pk)"))
        run("PutItem, idem's claim", lambda i: d.put_item(
            TableName=table, Item=in_flight(b"c%d" % i),
            ConditionExpression="attribute_not_exists(#pk) OR (#traced <= :now AND #tok < :now)",
            ExpressionAttributeNames={"#pk": "pk", "#traced": "traced", "#tok": "tok"},
            ExpressionAttributeValues={":now": {"N": str(now)}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD"))
        run("UpdateItem, idem's completion", lambda i: d.update_item(
            TableName=table, Key={"pk": {"B": b"c%d" % i}},
            UpdateExpression="SET #st = :completed, #until = :until, #traced = :traced, "
                             "#out = :out, #expires = :expires",
            ExpressionAttributeNames={"#st": "st", "#until": "until", "#traced": "traced",
                                      "#out": "out", "#expires": "expires", "#tok": "tok"},
            ExpressionAttributeValues=dict(holder_values, **{
                ":completed": {"S": "C"}, ":until": {"N": str(now + 10**8)},
                ":traced": {"N": str(now + 10**9)}, ":out": {"B": out},
                ":expires": {"N": "99999999999"}}),
            ReturnValuesOnConditionCheckFailure="ALL_OLD", **holder))
        for i in range(N):
            d.put_item(TableName=table, Item=in_flight(b"d%d" % i))
        run("PutItem of the whole item, the completion's condition", lambda i: d.put_item(
            TableName=table, Item=dict(in_flight(b"d%d" % i), st={"S": "C"}, out={"B": out}),
            ExpressionAttributeNames={"#st": "st", "#until": "until", "#tok": "tok"},
            ExpressionAttributeValues=holder_values, **holder))
    finally:
        d.delete_table(TableName=table)


if __name__ == "__main__":
    main()
