package config

// TenantCredentials is what of c's tenants decides upstream name's
// credentials: each tenant's headers, auth and (stdio) env for it, by
// tenant id.
func (c *Config) TenantCredentials(name string) map[string]TenantUpstream {
	var out map[string]TenantUpstream
	for i := range c.Tenants {
		if tu := c.Tenants[i].TenantUpstream(name); tu != nil && (len(tu.Headers) > 0 || tu.Auth != nil || len(tu.Env) > 0) {
			if out == nil {
				out = make(map[string]TenantUpstream)
			}
			out[c.Tenants[i].ID] = TenantUpstream{Headers: tu.Headers, Auth: tu.Auth, Env: tu.Env}
		}
	}
	return out
}
