#!/usr/bin/env python3
"""One scrape of herald serve's /metrics, as prometheus_client (PyPI) parses it.

    metrics_families.py --port PORT --token-file FILE

Prints one JSON object: {"status": HTTP status, "families": {name: type},
"samples": [sample names], "values": {"name{label=value,…}": value}}
(labels sorted by name; a sample without labels is its name alone). prometheus_client names a counter's family
without `_total` and its samples with it; MetricsTests looks for either.
"""
import argparse
import http.client
import json

from prometheus_client.parser import text_string_to_metric_families


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-file", required=True)
    args = parser.parse_args()
    with open(args.token_file, encoding="utf-8") as f:
        token = f.readline().strip()
    connection = http.client.HTTPConnection("127.0.0.1", args.port, timeout=30)
    connection.request("GET", "/metrics", headers={"Authorization": "Bearer " + token})
    response = connection.getresponse()
    body = response.read().decode()
    families, samples, values = {}, set(), {}
    for family in text_string_to_metric_families(body):
        families[family.name] = family.type
        for sample in family.samples:
            samples.add(sample.name)
            labels = ",".join("%s=%s" % kv for kv in sorted(sample.labels.items()))
            values[sample.name + ("{%s}" % labels if labels else "")] = sample.value
    print(json.dumps({"status": response.status, "families": families, "samples": sorted(samples), "values": values}))


if __name__ == "__main__":
    main()
