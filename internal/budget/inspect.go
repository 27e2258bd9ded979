package budget

// Limit returns the calls the quota allows per period, for the operator
// console.
func (q *QuotaRule) Limit() int64 { return q.calls }
