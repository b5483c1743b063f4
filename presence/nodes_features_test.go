package presence

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAllHave: a feature is relied on only when every node lists it; a node
// of v0.1.0 lists none.
func TestAllHave(t *testing.T) {
	both := Node{ID: "a", Features: []string{"x", "y"}}
	onlyX := Node{ID: "b", Features: []string{"x"}}
	old := Node{ID: "c"}
	assert.True(t, AllHave(nil, "x"))
	assert.True(t, AllHave([]Node{both, onlyX}, "x"))
	assert.False(t, AllHave([]Node{both, onlyX}, "y"))
	assert.False(t, AllHave([]Node{both, old}, "x"))
}
