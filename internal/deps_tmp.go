package internal

import (
	_ "github.com/go-chi/chi/v5"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sync/singleflight"
)
