import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_webperf.stats.histogram import SUB_BUCKETS, Histogram, bucket_bounds, bucket_index

values = st.integers(min_value=0, max_value=10**10)


@given(values)
def test_bucket_holds_its_value_within_precision(value):
    low, high = bucket_bounds(bucket_index(value))
    assert low <= value <= high
    assert high - low <= max(value, 1) / SUB_BUCKETS


@given(st.lists(values, min_size=1, max_size=300), st.floats(min_value=0.1, max_value=100))
def test_percentile_close_to_exact(samples, percent):
    histogram = Histogram()
    histogram.record_many(samples)
    ordered = sorted(samples)
    exact = ordered[max(0, math.ceil(len(ordered) * percent / 100) - 1)]
    assert math.isclose(histogram.percentile(percent), exact, rel_tol=1 / SUB_BUCKETS, abs_tol=1)


@given(st.lists(values, max_size=100), st.lists(values, max_size=100))
def test_merge_equals_recording_everything(first, second):
    a, b, both = Histogram(), Histogram(), Histogram()
    a.record_many(first)
    b.record_many(second)
    both.record_many(first + second)
    a += b
    assert a.to_dict() == both.to_dict()


@given(st.lists(values, max_size=100))
def test_serialization_round_trip(samples):
    histogram = Histogram()
    histogram.record_many(samples)
    clone = Histogram.from_dict(histogram.to_dict())
    assert clone.to_dict() == histogram.to_dict()
    assert clone.percentile(99) == histogram.percentile(99)


def test_mean_is_exact_and_empty_is_zero():
    histogram = Histogram()
    assert histogram.percentile(50) == 0.0 and histogram.mean() == 0.0
    histogram.record_many([1000, 3000])
    assert histogram.mean() == 2000.0 and histogram.max() == 3000
