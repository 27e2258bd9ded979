package credentials

import "context"

// Who a client request reaches an upstream as: the functions below are
// what a request handler needs of this package, over the plain fields of
// the request's verified principal.

// NewCaller returns the caller of a request authenticated as issuer,
// subject and tenant with scopes; token is the request's verified access
// token ("" for none: token exchange cannot act for such a caller).
func NewCaller(issuer, subject, tenant string, scopes []string, token string) *Caller {
	return &Caller{Issuer: issuer, Subject: subject, Tenant: tenant, Scopes: scopes, Token: NewSecret(token)}
}

// Carry returns ctx carrying the caller who returns, when perRequest: some
// upstream's credentials depend on the caller (see [Source.NeedsCaller]).
// Otherwise it returns ctx as it is, and who is not called.
func Carry(ctx context.Context, perRequest bool, who func() *Caller) context.Context {
	if !perRequest {
		return ctx
	}
	return With(ctx, who())
}

// PartitionOf names the identity a request reaches an upstream with ("" when
// every caller reaches it as the same one): src is the upstream's
// per-request credentials (nil for static headers alone). who is the
// request's caller if it was made already; if not (nil), the caller is
// the one of issuer, subject and tenant, which is all a partition depends
// on.
func PartitionOf(src Source, who *Caller, issuer, subject, tenant string) string {
	if src == nil {
		return ""
	}
	if who == nil {
		who = &Caller{Issuer: issuer, Subject: subject, Tenant: tenant}
	}
	return src.Partition(who)
}

// AuditMode names, for the audit log, how who reached an upstream whose
// per-request credentials are src: "" for static headers, and when there
// was no per-request caller (who nil) or no such credentials (src nil).
func AuditMode(src Source, who *Caller) string {
	if src == nil || who == nil {
		return ""
	}
	if m := src.Mode(who); m != ModeStatic {
		return m
	}
	return ""
}

// TenantOf returns the tenant of the caller ctx carries ("" for none).
func TenantOf(ctx context.Context) string { return From(ctx).Tenant }
