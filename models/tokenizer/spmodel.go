package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file reads SentencePiece's tokenizer.model, a serialized ModelProto
// (sentencepiece_model.proto), with the protobuf wire format alone. Fields
// this package does not use are skipped; a field it uses must have its
// declared wire type.

// pieceType is ModelProto.SentencePiece.Type.
type pieceType int

const (
	pieceNormal      pieceType = 1
	pieceUnknown     pieceType = 2
	pieceControl     pieceType = 3
	pieceUserDefined pieceType = 4
	pieceUnused      pieceType = 5
	pieceByte        pieceType = 6
)

var pieceTypeNames = map[pieceType]string{
	pieceNormal: "NORMAL", pieceUnknown: "UNKNOWN", pieceControl: "CONTROL",
	pieceUserDefined: "USER_DEFINED", pieceUnused: "UNUSED", pieceByte: "BYTE",
}

// modelTypeBPE is TrainerSpec.ModelType's BPE.
const modelTypeBPE = 2

var modelTypeNames = map[uint64]string{1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}

// spPiece is one ModelProto.SentencePiece.
type spPiece struct {
	piece string
	score float32
	typ   pieceType
}

// spProto is what this package reads of a ModelProto, with the proto's
// defaults.
type spProto struct {
	pieces []spPiece

	// TrainerSpec
	modelType          uint64
	byteFallback       bool
	whitespaceAsSuffix bool
	unkPiece, bosPiece string
	eosPiece           string
	unkSurface         string

	// NormalizerSpec
	normName         string
	charsmap         []byte
	addDummyPrefix   bool
	removeExtraSpace bool
	escapeSpace      bool
	denormCharsmap   []byte
}

// Field numbers of sentencepiece_model.proto.
const (
	fModelPieces       = 1
	fModelTrainerSpec  = 2
	fModelNormalizer   = 3
	fModelDenormalizer = 5

	fPiecePiece = 1
	fPieceScore = 2
	fPieceType  = 3

	fTrainerModelType       = 3
	fTrainerWhitespaceSufix = 24
	fTrainerByteFallback    = 35
	fTrainerUnkSurface      = 44
	fTrainerUnkPiece        = 45
	fTrainerBOSPiece        = 46
	fTrainerEOSPiece        = 47

	fNormName           = 1
	fNormCharsmap       = 2
	fNormAddDummyPrefix = 3
	fNormRemoveExtraWS  = 4
	fNormEscapeWS       = 5
)

// maxPieces bounds the number of pieces, as maxID bounds tokenizer.json's
// ids.
const maxPieces = maxID

func parseModelProto(data []byte) (*spModel, error) {
	p := spProto{
		modelType:        1, // UNIGRAM
		unkPiece:         "<unk>",
		bosPiece:         "<s>",
		eosPiece:         "</s>",
		unkSurface:       " \u2047 ",
		addDummyPrefix:   true,
		removeExtraSpace: true,
		escapeSpace:      true,
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("empty file: %w", ErrInvalid)
	}
	err := walk("ModelProto", data, modelWireTypes, func(num protowire.Number, b []byte, v uint64) error {
		switch num {
		case fModelPieces:
			if len(p.pieces) >= maxPieces {
				return fmt.Errorf("more than %d pieces: %w", maxPieces, ErrInvalid)
			}
			sp, err := parsePiece(len(p.pieces), b)
			if err != nil {
				return err
			}
			p.pieces = append(p.pieces, sp)
		case fModelTrainerSpec:
			return walk("trainer_spec", b, trainerWireTypes, p.trainerField)
		case fModelNormalizer:
			return walk("normalizer_spec", b, normalizerWireTypes, p.normalizerField)
		case fModelDenormalizer:
			return walk("denormalizer_spec", b, normalizerWireTypes, func(num protowire.Number, b []byte, _ uint64) error {
				if num == fNormCharsmap {
					p.denormCharsmap = b
				}
				return nil
			})
		}
		return nil
	})
	if errors.Is(err, ErrInvalid) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("not a SentencePiece model: %v: %w", err, ErrInvalid)
	}
	return newSPModel(&p)
}

// wireTypes are the wire types of the fields this package reads.
var (
	modelWireTypes = map[protowire.Number]protowire.Type{
		fModelPieces: protowire.BytesType, fModelTrainerSpec: protowire.BytesType,
		fModelNormalizer: protowire.BytesType, fModelDenormalizer: protowire.BytesType,
	}
	pieceWireTypes = map[protowire.Number]protowire.Type{
		fPiecePiece: protowire.BytesType, fPieceScore: protowire.Fixed32Type, fPieceType: protowire.VarintType,
	}
	trainerWireTypes = map[protowire.Number]protowire.Type{
		fTrainerModelType: protowire.VarintType, fTrainerWhitespaceSufix: protowire.VarintType,
		fTrainerByteFallback: protowire.VarintType, fTrainerUnkSurface: protowire.BytesType,
		fTrainerUnkPiece: protowire.BytesType, fTrainerBOSPiece: protowire.BytesType,
		fTrainerEOSPiece: protowire.BytesType,
	}
	normalizerWireTypes = map[protowire.Number]protowire.Type{
		fNormName: protowire.BytesType, fNormCharsmap: protowire.BytesType,
		fNormAddDummyPrefix: protowire.VarintType, fNormRemoveExtraWS: protowire.VarintType,
		fNormEscapeWS: protowire.VarintType,
	}
)

// walk calls fn for every field of the message in data: for a
// length-delimited field b is its content, for a varint or fixed field v
// its value. A field listed in want must have that wire type.
func walk(msg string, data []byte, want map[protowire.Number]protowire.Type, fn func(num protowire.Number, b []byte, v uint64) error) error {
	for off := 0; off < len(data); {
		num, typ, n := protowire.ConsumeTag(data[off:])
		if n < 0 {
			return fmt.Errorf("%s: byte %d: bad field tag: %v", msg, off, protowire.ParseError(n))
		}
		if w, ok := want[num]; ok && w != typ {
			return fmt.Errorf("%s: byte %d: field %d has wire type %d, want %d", msg, off, num, typ, w)
		}
		start := off
		off += n
		var (
			b []byte
			v uint64
		)
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(data[off:])
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(data[off:])
			v = uint64(v32)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(data[off:])
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(data[off:])
		default:
			n = protowire.ConsumeFieldValue(num, typ, data[off:])
		}
		if n < 0 {
			return fmt.Errorf("%s: byte %d: field %d: %v", msg, start, num, protowire.ParseError(n))
		}
		off += n
		if err := fn(num, b, v); err != nil {
			return err
		}
	}
	return nil
}

// parsePiece reads ModelProto.pieces[i].
func parsePiece(i int, data []byte) (spPiece, error) {
	sp := spPiece{typ: pieceNormal}
	where := fmt.Sprintf("pieces[%d]", i)
	err := walk(where, data, pieceWireTypes, func(num protowire.Number, b []byte, v uint64) error {
		switch num {
		case fPiecePiece:
			sp.piece = string(b)
		case fPieceScore:
			sp.score = math.Float32frombits(uint32(v))
		case fPieceType:
			t := pieceType(int32(v))
			if _, ok := pieceTypeNames[t]; !ok {
				return fmt.Errorf("%s: type %d is not a piece type: %w", where, int32(v), ErrInvalid)
			}
			sp.typ = t
		}
		return nil
	})
	if err != nil {
		return spPiece{}, err
	}
	switch {
	case sp.piece == "":
		return spPiece{}, fmt.Errorf("%s: empty piece: %w", where, ErrInvalid)
	case !utf8.ValidString(sp.piece):
		return spPiece{}, fmt.Errorf("%s: piece %q is not valid UTF-8: %w", where, sp.piece, ErrInvalid)
	case math.IsNaN(float64(sp.score)):
		return spPiece{}, fmt.Errorf("%s %q: score is NaN: %w", where, sp.piece, ErrInvalid)
	}
	return sp, nil
}

func (p *spProto) trainerField(num protowire.Number, b []byte, v uint64) error {
	switch num {
	case fTrainerModelType:
		p.modelType = v
	case fTrainerWhitespaceSufix:
		p.whitespaceAsSuffix = v != 0
	case fTrainerByteFallback:
		p.byteFallback = v != 0
	case fTrainerUnkSurface:
		p.unkSurface = string(b)
	case fTrainerUnkPiece:
		p.unkPiece = string(b)
	case fTrainerBOSPiece:
		p.bosPiece = string(b)
	case fTrainerEOSPiece:
		p.eosPiece = string(b)
	}
	return nil
}

func (p *spProto) normalizerField(num protowire.Number, b []byte, v uint64) error {
	switch num {
	case fNormName:
		p.normName = string(b)
	case fNormCharsmap:
		p.charsmap = b
	case fNormAddDummyPrefix:
		p.addDummyPrefix = v != 0
	case fNormRemoveExtraWS:
		p.removeExtraSpace = v != 0
	case fNormEscapeWS:
		p.escapeSpace = v != 0
	}
	return nil
}

// newSPModel checks the model as SentencePiece's ModelInterface does and
// builds its tables.
func newSPModel(p *spProto) (*spModel, error) {
	switch {
	case p.modelType != modelTypeBPE:
		name := modelTypeNames[p.modelType]
		if name == "" {
			name = fmt.Sprint(p.modelType)
		}
		return nil, fmt.Errorf("trainer_spec.model_type %s: only BPE is supported: %w", name, ErrUnsupported)
	case len(p.charsmap) > 0:
		return nil, fmt.Errorf("normalizer_spec: normalization rule %q (a precompiled_charsmap): only the identity rule (no charsmap, as Llama's) is supported: %w", p.normName, ErrUnsupported)
	case len(p.denormCharsmap) > 0:
		return nil, fmt.Errorf("denormalizer_spec has a precompiled_charsmap: not supported: %w", ErrUnsupported)
	case p.whitespaceAsSuffix:
		return nil, fmt.Errorf("trainer_spec.treat_whitespace_as_suffix is set: not supported: %w", ErrUnsupported)
	case len(p.pieces) == 0:
		return nil, fmt.Errorf("no pieces: %w", ErrInvalid)
	}
	m := &spModel{
		pieces:           p.pieces,
		normal:           make(map[string]int32, len(p.pieces)),
		reserved:         map[string]int32{},
		unk:              -1,
		byteFallback:     p.byteFallback,
		addDummyPrefix:   p.addDummyPrefix,
		removeExtraSpace: p.removeExtraSpace,
		escapeSpace:      p.escapeSpace,
		unkSurface:       p.unkSurface,
	}
	var bytesFound [256]bool
	for i, sp := range p.pieces {
		table := m.reserved
		switch sp.typ {
		case pieceNormal, pieceUserDefined, pieceUnused:
			table = m.normal
		}
		if _, dup := table[sp.piece]; dup {
			return nil, fmt.Errorf("pieces[%d]: %q is already defined: %w", i, sp.piece, ErrInvalid)
		}
		table[sp.piece] = int32(i)
		switch sp.typ {
		case pieceUserDefined:
			m.userDefined = append(m.userDefined, sp.piece)
		case pieceUnknown:
			if m.unk >= 0 {
				return nil, fmt.Errorf("pieces[%d] %q: a second UNKNOWN piece (the first is %q): %w", i, sp.piece, p.pieces[m.unk].piece, ErrInvalid)
			}
			m.unk = int32(i)
		case pieceByte:
			if !p.byteFallback {
				return nil, fmt.Errorf("pieces[%d]: byte piece %q although trainer_spec.byte_fallback is false: %w", i, sp.piece, ErrInvalid)
			}
			b, ok := spByte(sp.piece)
			if !ok {
				return nil, fmt.Errorf("pieces[%d]: byte piece %q is not <0x00>..<0xFF>: %w", i, sp.piece, ErrInvalid)
			}
			bytesFound[b] = true
		}
	}
	if m.unk < 0 {
		return nil, fmt.Errorf("no UNKNOWN piece: %w", ErrInvalid)
	}
	if p.byteFallback {
		for b, ok := range bytesFound {
			if !ok {
				return nil, fmt.Errorf("trainer_spec.byte_fallback is set but there is no byte piece <0x%02X>: %w", b, ErrInvalid)
			}
		}
		for b := range m.byteIDs {
			m.byteIDs[b] = m.reserved[fmt.Sprintf("<0x%02X>", b)]
		}
	}
	m.bos, m.eos = m.controlID(p.bosPiece), m.controlID(p.eosPiece)
	m.buildPrefixMatcher()
	return m, nil
}

// spByte parses a byte piece: exactly "<0xXX>" with upper-case hex digits,
// as SentencePiece's PieceToByte.
func spByte(piece string) (byte, bool) {
	if len(piece) != 6 || piece[:3] != "<0x" || piece[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(piece[3:5]) {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | (c - '0')
		case 'A' <= c && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

// controlID is the id of piece if it is a CONTROL piece, else -1 (as
// SentencePieceProcessor's bos_id and eos_id).
func (m *spModel) controlID(piece string) int {
	id := m.pieceID(piece)
	if m.pieces[id].typ == pieceControl {
		return int(id)
	}
	return -1
}
