package main

import (
	"math/bits"
	"time"
)

// histogram records durations in fixed log-linear buckets, like an HDR
// histogram with 8 bits of precision: values below 512ns are exact, larger
// ones fall in one of 256 buckets per power of two, so a percentile is off
// by at most 1/256 (0.4%) of its value. It takes constant memory whatever
// the number of samples, and merging is adding counts.
//
// The zero value is empty and ready to use. A histogram is not safe for
// concurrent use: each virtual client has its own, merged at the end.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    time.Duration
	min    time.Duration
	max    time.Duration
}

const (
	histSubBits = 8
	histSub     = 1 << histSubBits
	// histBuckets covers every non-negative int64: exponents 0 to 55 above
	// the exact range, 256 buckets each, plus the exact range.
	histBuckets = (64 - histSubBits) * histSub
)

// bucketOf returns the bucket of v nanoseconds.
func bucketOf(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits - 1 // v in [2^(e+8), 2^(e+9)), e >= 1
	return (e+1)<<histSubBits + int(v>>e) - histSub
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < 2*histSub {
		return uint64(i), uint64(i)
	}
	e := i>>histSubBits - 1
	m := uint64(i&(histSub-1) + histSub)
	return m << e, (m+1)<<e - 1
}

// record adds one sample. Negative durations count as zero.
func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
	h.sum += d
}

// merge adds o's samples to h.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the q-quantile (0 < q <= 1) by the nearest-rank method:
// the smallest recorded value that at least q of the samples do not exceed,
// as the middle of its bucket, clamped to the exact minimum and maximum.
// It returns 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(q * float64(h.n))
	if float64(rank) < q*float64(h.n) || rank == 0 {
		rank++ // ceil, and at least the first sample
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := time.Duration(lo + (hi-lo)/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// mean returns the mean sample, or 0 for an empty histogram.
func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}
