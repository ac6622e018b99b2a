// Keys per split of decode attention for a row of `len` keys (attention_decode.wgsl and
// attention_combine.wgsl agree through it): SPLIT, or 2·SPLIT past params.long_len, where fewer, longer
// splits run faster while shorter rows need the splits to fill the GPU.
fn split_of(len: u32) -> u32 { return select(SPLIT, 2u * SPLIT, len > params.long_len); }
