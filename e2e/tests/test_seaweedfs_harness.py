"""The SeaweedFS harness of the tiered-storage tests (seaweedfs.py) against a real S3 client
(boto3): signed put/get/list/delete work, unsigned or wrongly signed requests get 403, and the
outages the tests inject do what they say."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, ReadTimeoutError

from seaweedfs import anonymous_status


def test_put_get_list_delete(seaweedfs):
    assert seaweedfs.endpoint.startswith("http://127.0.0.1:") and seaweedfs.url == "s3://tiered"
    s3 = seaweedfs.client()
    body = bytes(range(256)) * 4096  # 1 MiB
    s3.put_object(Bucket="tiered", Key="topic-0/00000000000000000000.log", Body=body)
    s3.put_object(Bucket="tiered", Key="topic-0/00000000000000000000.index", Body=b"idx")
    s3.put_object(Bucket="tiered", Key="other/x", Body=b"x")

    assert s3.get_object(Bucket="tiered", Key="topic-0/00000000000000000000.log")["Body"].read() == body
    ranged = s3.get_object(Bucket="tiered", Key="topic-0/00000000000000000000.log", Range="bytes=1000-1999")
    assert ranged["Body"].read() == body[1000:2000]
    listed = s3.list_objects_v2(Bucket="tiered", Prefix="topic-0/")
    assert sorted((o["Key"], o["Size"]) for o in listed["Contents"]) == [
        ("topic-0/00000000000000000000.index", 3), ("topic-0/00000000000000000000.log", len(body))]

    # No anonymous access, and the secret matters.
    obj = f"{seaweedfs.endpoint}/tiered/other/x"
    assert anonymous_status(obj) == 403
    assert anonymous_status(f"{seaweedfs.endpoint}/tiered/anon", "PUT", b"y") == 403
    assert anonymous_status(f"{seaweedfs.endpoint}/tiered?list-type=2") == 403
    wrong = boto3.session.Session().client(
        "s3", endpoint_url=seaweedfs.endpoint, region_name="us-east-1",
        aws_access_key_id=seaweedfs.access_key, aws_secret_access_key="wrong")
    with pytest.raises(ClientError) as e:
        wrong.get_object(Bucket="tiered", Key="other/x")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403

    s3.delete_object(Bucket="tiered", Key="topic-0/00000000000000000000.index")
    s3.delete_objects(Bucket="tiered", Delete={"Objects": [{"Key": "other/x"}]})
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="tiered")["Contents"]] == [
        "topic-0/00000000000000000000.log"]
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket="tiered", Key="other/x")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_outages(seaweedfs):
    s3 = seaweedfs.client(read_timeout=1, retries={"max_attempts": 1})
    s3.put_object(Bucket="tiered", Key="k", Body=b"v")
    with seaweedfs.outage():  # paused: the request hangs until the client gives up
        with pytest.raises(ReadTimeoutError):
            s3.get_object(Bucket="tiered", Key="k")
    assert s3.get_object(Bucket="tiered", Key="k")["Body"].read() == b"v"
    with seaweedfs.outage("stop"):  # stopped: connections refused
        with pytest.raises(BotoConnectionError):
            s3.get_object(Bucket="tiered", Key="k")
    # started again on the same data and endpoint
    assert s3.get_object(Bucket="tiered", Key="k")["Body"].read() == b"v"
