//go:build tools

// This file pins the project's dependencies while the packages that use
// them are being written; it is never built.
package chatd

import (
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/bits-and-blooms/bloom/v3"
	_ "github.com/chromedp/chromedp"
	_ "github.com/gofiber/contrib/websocket"
	_ "github.com/gofiber/fiber/v2"
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/stretchr/testify/assert"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
)
