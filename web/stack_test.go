package web

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOnFreshStack(t *testing.T) {
	t.Run("runs fn to its end before returning", func(t *testing.T) {
		ran := false
		onFreshStack(func() { ran = true })
		assert.True(t, ran)
	})
	t.Run("a panic in fn is raised again on the caller, with fn's stack", func(t *testing.T) {
		var got any
		func() {
			defer func() { got = recover() }()
			onFreshStack(func() { deepPanic(3) })
		}()
		require.NotNil(t, got)
		msg, ok := got.(string)
		require.True(t, ok, "%T", got)
		assert.True(t, strings.HasPrefix(msg, "boom"), msg)
		assert.Contains(t, msg, "deepPanic", "fn's own stack is in the value")
	})
}

//go:noinline
func deepPanic(n int) {
	if n == 0 {
		panic("boom")
	}
	deepPanic(n - 1)
}
