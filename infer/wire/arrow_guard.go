package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// checkIPCVectors walks the flatbuffer metadata of every message in an
// Arrow IPC stream and checks that each vector's length fits in its
// message. arrow-go sizes Go slices straight from those lengths (the
// schema's fields, a field's children, custom metadata, a batch's nodes and
// buffers), so a few hostile bytes could claim billions of elements and make
// the worker allocate tens of gigabytes, or die of it. Only lengths are
// checked here; everything else is left to arrow-go.
func checkIPCVectors(raw []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt Arrow message metadata: %v", r)
		}
	}()
	for off := 0; off+4 <= len(raw); {
		n := int(int32(binary.LittleEndian.Uint32(raw[off:])))
		off += 4
		if uint32(n) == 0xFFFFFFFF { // continuation marker of the modern framing
			if off+4 > len(raw) {
				return nil
			}
			n = int(int32(binary.LittleEndian.Uint32(raw[off:])))
			off += 4
		}
		if n == 0 {
			return nil // end of stream
		}
		if n < 0 || off+n > len(raw) {
			return fmt.Errorf("message of %d bytes runs past the stream's %d", n, len(raw))
		}
		msg := raw[off : off+n]
		if err := checkMessage(msg); err != nil {
			return err
		}
		off += n
		// The body follows; its length is in the message.
		body, err := messageBodyLength(msg)
		if err != nil {
			return err
		}
		if body < 0 || body > int64(len(raw)-off) {
			return fmt.Errorf("message body of %d bytes runs past the stream", body)
		}
		off += int(body)
	}
	return nil
}

// Vtable slots of the Arrow IPC schema (format/Message.fbs, Schema.fbs).
const (
	msgHeaderType     = 6
	msgHeader         = 8
	msgBodyLength     = 10
	msgCustomMetadata = 12

	schemaFields         = 6
	schemaCustomMetadata = 8
	schemaFeatures       = 10

	fieldChildren       = 14
	fieldCustomMetadata = 16

	batchNodes    = 6
	batchBuffers  = 8
	batchVariadic = 12

	dictData = 6

	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3

	maxFieldDepth = 64
)

var errVector = errors.New("metadata vector longer than its message")

func root(buf []byte) *flatbuffers.Table {
	if len(buf) < 4 {
		panic("message shorter than its root offset")
	}
	return &flatbuffers.Table{Bytes: buf, Pos: flatbuffers.GetUOffsetT(buf)}
}

// vector checks the vector in slot and returns its length (0 when absent).
func vector(t *flatbuffers.Table, slot flatbuffers.VOffsetT, elemSize int) (int, error) {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	if o == 0 {
		return 0, nil
	}
	start := int(t.Vector(o))
	n := t.VectorLen(o)
	if n < 0 || start < 0 || start > len(t.Bytes) || n > (len(t.Bytes)-start)/elemSize {
		return 0, fmt.Errorf("%w (%d elements)", errVector, n)
	}
	return n, nil
}

// table returns element i of the table vector in slot.
func table(t *flatbuffers.Table, slot flatbuffers.VOffsetT, i int) *flatbuffers.Table {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	pos := t.Vector(o) + flatbuffers.UOffsetT(i*4)
	return &flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(pos)}
}

// union returns the table in slot, or nil.
func union(t *flatbuffers.Table, slot flatbuffers.VOffsetT) *flatbuffers.Table {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	if o == 0 {
		return nil
	}
	u := &flatbuffers.Table{}
	t.Union(u, o)
	return u
}

func checkMessage(buf []byte) error {
	m := root(buf)
	if _, err := vector(m, msgCustomMetadata, 4); err != nil {
		return err
	}
	h := union(m, msgHeader)
	if h == nil {
		return nil
	}
	switch m.GetByteSlot(msgHeaderType, 0) {
	case headerSchema:
		return checkSchema(h)
	case headerRecordBatch:
		return checkBatch(h)
	case headerDictionaryBatch:
		if d := union(h, dictData); d != nil {
			return checkBatch(d)
		}
	}
	return nil
}

func checkSchema(s *flatbuffers.Table) error {
	for _, v := range []struct {
		slot flatbuffers.VOffsetT
		size int
	}{{schemaCustomMetadata, 4}, {schemaFeatures, 8}} {
		if _, err := vector(s, v.slot, v.size); err != nil {
			return err
		}
	}
	return checkFields(s, schemaFields, 0)
}

func checkFields(t *flatbuffers.Table, slot flatbuffers.VOffsetT, depth int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("schema nests fields deeper than %d", maxFieldDepth)
	}
	n, err := vector(t, slot, 4)
	if err != nil {
		return err
	}
	for i := range n {
		f := table(t, slot, i)
		if _, err := vector(f, fieldCustomMetadata, 4); err != nil {
			return err
		}
		if err := checkFields(f, fieldChildren, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func checkBatch(b *flatbuffers.Table) error {
	for _, v := range []struct {
		slot flatbuffers.VOffsetT
		size int
	}{{batchNodes, 16}, {batchBuffers, 16}, {batchVariadic, 8}} {
		if _, err := vector(b, v.slot, v.size); err != nil {
			return err
		}
	}
	return nil
}

// messageBodyLength reads Message.bodyLength.
func messageBodyLength(buf []byte) (int64, error) {
	return root(buf).GetInt64Slot(msgBodyLength, 0), nil
}
