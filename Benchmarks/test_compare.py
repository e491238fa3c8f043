"""Unit tests for compare.py's output parsers: python3 -m unittest discover -s Benchmarks -p 'test_*.py'"""

import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep __pycache__ out of the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

H2LOAD_OUTPUT = """starting benchmark...
spawning thread #0: 4 total client(s). 20000 total requests
TLS Protocol: TLSv1.3
Application protocol: h2
progress: 100% done

finished in 238.14ms, 83984.23 req/s, 2.33MB/s
requests: 20000 total, 20000 started, 20000 done, 19990 succeeded, 10 failed, 0 errored, 0 timeout
status codes: 19990 2xx, 0 3xx, 0 4xx, 10 5xx
traffic: 567.45KB (581064) total, 176.07KB (180292) headers (space savings 94.11%), 39.06KB (40000) data
                     min         max         mean         sd        +/- sd
time for request:      451us     41.26ms     10.00ms      1.2s    74.77%
time for connect:     3.44ms      7.52ms      5.45ms      1.75ms    50.00%
"""


class ParserTests(unittest.TestCase):
    def test_durations(self):
        self.assertEqual(compare.duration_us("451us"), 451.0)
        self.assertAlmostEqual(compare.duration_us("3.62ms"), 3620.0)
        self.assertEqual(compare.duration_us("1.5s"), 1_500_000.0)
        with self.assertRaises(ValueError):
            compare.duration_us("12 parsecs")

    def test_h2load_summary(self):
        parsed = compare.parse_h2load(H2LOAD_OUTPUT)
        self.assertAlmostEqual(parsed["seconds"], 0.23814)
        self.assertEqual(parsed["requests_per_second"], 83984.23)
        self.assertEqual((parsed["total"], parsed["succeeded"], parsed["failed"], parsed["errored"]),
                         (20000, 19990, 10, 0))
        self.assertEqual(parsed["status_2xx"], 19990)
        self.assertEqual(parsed["latency_us"], {"min": 451.0, "max": 41260.0, "mean": 10000.0, "sd": 1_200_000.0})

    def test_h2load_without_summary_is_an_error(self):
        with self.assertRaises(ValueError):
            compare.parse_h2load("starting benchmark...\nconnect: Connection refused\n")

    def test_pushcast_json(self):
        line = '{"requests": 10, "succeeded": 10, "failed": 0, "requests_per_second": 5.5, "latency_us": {"p50": 7}}'
        self.assertEqual(compare.parse_pushcast_json(line)["latency_us"]["p50"], 7)
        self.assertEqual(compare.parse_pushcast_json("note: epoll fallback\n" + line + "\n")["succeeded"], 10)
        with self.assertRaises(ValueError):
            compare.parse_pushcast_json("no json here")

    def test_ratio_and_format(self):
        self.assertEqual(compare.ratio(3.0, 4.0), "0.75")
        self.assertEqual(compare.ratio(None, 4.0), "n/a")
        self.assertEqual(compare.ratio(1.0, 0), "n/a")
        self.assertEqual(compare.fmt(200000), "200,000")
        self.assertEqual(compare.fmt(None), "n/a")

    def test_quick_sets_twenty_thousand_unless_requests_given(self):
        self.assertEqual(compare.parse_options(["--quick"]).requests, 20_000)
        self.assertEqual(compare.parse_options(["--quick", "-n", "500"]).requests, 500)
        self.assertEqual(compare.parse_options(["--quick", "--requests=700"]).requests, 700)
        self.assertEqual(compare.parse_options([]).requests, 200_000)


if __name__ == "__main__":
    unittest.main()
