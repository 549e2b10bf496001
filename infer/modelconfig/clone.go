package modelconfig

import (
	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// cloneConfig is a deep copy of cfg.
func cloneConfig(cfg *kservepb.ModelConfig) *kservepb.ModelConfig {
	return proto.Clone(cfg).(*kservepb.ModelConfig)
}
