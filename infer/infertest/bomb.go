package infertest

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// BombPNG returns a valid w×h 8-bit RGBA PNG of black pixels, written
// row by row so that making it allocates one row, not the canvas: a
// decompression bomb of a few hundred KB that decodes to 4×w×h bytes
// (5792×5792: about 130 KB that becomes 134 MB).
func BombPNG(tb testing.TB, w, h int) []byte {
	tb.Helper()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 6, 0, 0, 0) // depth 8, RGBA, deflate, no filter, no interlace
	pngChunk(&b, "IHDR", ihdr)
	var idat bytes.Buffer
	zw, err := zlib.NewWriterLevel(&idat, zlib.BestCompression)
	if err != nil {
		tb.Fatal(err)
	}
	row := make([]byte, 1+4*w) // filter byte 0, then transparent black
	for range h {
		if _, err := zw.Write(row); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	pngChunk(&b, "IDAT", idat.Bytes())
	pngChunk(&b, "IEND", nil)
	return b.Bytes()
}

func pngChunk(b *bytes.Buffer, kind string, data []byte) {
	_ = binary.Write(b, binary.BigEndian, uint32(len(data)))
	crc := crc32.NewIEEE()
	crc.Write([]byte(kind))
	crc.Write(data)
	b.WriteString(kind)
	b.Write(data)
	_ = binary.Write(b, binary.BigEndian, crc.Sum32())
}
