package config

// Features says how events become vectors.
type Features struct {
	// Bits sets the hashed space to 2^Bits slots; default 18.
	Bits uint `yaml:"bits"`
	// Scale is none (default), standard (running mean and variance,
	// updated before use) or l2.
	Scale string `yaml:"scale"`
	Text  Text   `yaml:"text"`
	// Dense, when > 0, is the required length of the dense `x` array.
	Dense int `yaml:"dense"`
}

// Text configures tokenization of the `text` field.
type Text struct {
	// NGrams: 1 (default) hashes words, n also every run of up to n words.
	NGrams int `yaml:"ngrams"`
}
