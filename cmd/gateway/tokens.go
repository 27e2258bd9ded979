package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/vault"
)

const tokensUsage = `usage: gateway tokens list -config FILE [-tenant ID] [-subject SUB] [-upstream NAME]
       gateway tokens revoke -config FILE (-tenant ID | -subject SUB) [-upstream NAME]

list shows the users' upstream tokens (auth mode user_oauth) the vault
holds, without their values; revoke revokes them at their authorization
servers (RFC 7009, where supported) and deletes them. Both need
sessions.store: redis (a memory store lives inside one gateway process).
`

// tokens administers the vault of user_oauth tokens.
func tokens(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "revoke") {
		fmt.Fprint(stderr, tokensUsage)
		return exitError{2}
	}
	sub := args[0]
	fs := newFlagSet("tokens "+sub, stderr)
	path := fs.String("config", "", "path of the YAML config file (required)")
	var f vault.Filter
	fs.StringVar(&f.Tenant, "tenant", "", "only the tokens of this tenant")
	fs.StringVar(&f.Subject, "subject", "", "only the tokens of this subject")
	fs.StringVar(&f.Upstream, "upstream", "", "only the tokens for this upstream")
	if err := fs.Parse(args[1:]); err != nil {
		return flagError(err)
	}
	if *path == "" || sub == "revoke" && f.Tenant == "" && f.Subject == "" {
		fmt.Fprint(stderr, tokensUsage)
		return exitError{2}
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	if cfg.Sessions.Store != config.StoreRedis {
		fmt.Fprintln(stderr, "gateway tokens: sessions.store is not redis: the tokens live inside the gateway process")
		return exitError{1}
	}
	if len(cfg.Vault.Keys) == 0 {
		fmt.Fprintln(stderr, "gateway tokens: the config has no vault.keys")
		return exitError{1}
	}
	rc, err := session.NewRedisClient(cfg.Sessions.Redis)
	if err != nil {
		fmt.Fprintln(stderr, "gateway tokens:", err)
		return exitError{1}
	}
	defer rc.Client.Close()
	b, err := credentials.NewBroker(cfg, credentials.BrokerOptions{
		Store: vault.NewRedis(rc.Client, rc.Prefix, rc.CallTimeout, credentials.VaultLimits(cfg)),
	})
	if err != nil {
		fmt.Fprintln(stderr, "gateway tokens:", err)
		return exitError{1}
	}
	infos, err := b.Vault().List(ctx, f)
	if err != nil {
		fmt.Fprintln(stderr, "gateway tokens:", err)
		return exitError{1}
	}
	if sub == "list" {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tSUBJECT\tISSUER\tUPSTREAM\tEXPIRES\tREFRESH\tUPDATED")
		for _, in := range infos {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\n", in.Tenant, in.Subject, in.Issuer, in.Upstream,
				stamp(in.Expiry), in.Refresh, stamp(in.Updated))
		}
		return tw.Flush()
	}
	n := 0
	for _, in := range infos {
		ok, err := b.Revoke(ctx, in.Key)
		if err != nil {
			fmt.Fprintf(stderr, "gateway tokens: %s/%s/%s: %v\n", in.Tenant, in.Subject, in.Upstream, err)
			return exitError{1}
		}
		if ok {
			n++
		}
	}
	fmt.Fprintf(stdout, "revoked %d tokens\n", n)
	return nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
