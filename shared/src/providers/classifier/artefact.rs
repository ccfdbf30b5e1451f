//! The model as bytes: what `triage train` stores and a worker loads, and what the version
//! hashes. Little-endian throughout, every field in a fixed order, so the same model is the
//! same bytes:
//!
//! ```text
//! magic "TRIAGELM" | format u16 | bucket_bits u8 | char_min u8 | char_max u8 | char_weight f32
//! | epochs u16 | learning_rate f32 | l2 f32 | examples u64
//! | temperature f32 | urgent_scale f32 | urgent_shift f32
//! | departments u16, each: length u16, UTF-8
//! | table f32 × 2^bucket_bits × (departments + 1) | bias f32 × (departments + 1)
//! | SHA-256 of everything before, 32 bytes
//! ```
//!
//! The digest catches a damaged or cut copy before it answers a single ticket. Format 2 has
//! format 1's layout and means the confidence is the department's probability alone
//! ([`Gate`]) and the features are normalised (`features`); format 1 is still read, and its
//! classifiers read and gate as they did.

use sha2::{Digest, Sha256};

use super::{
    calibrate::Calibration, features::FeatureSpec, fit::Hyper, fit::Weights, ArtefactError, Gate,
    LocalModel, MAX_DEPARTMENTS,
};

const MAGIC: &[u8; 8] = b"TRIAGELM";
/// Bumped whenever the layout or the meaning of a field (the features included) changes.
pub(super) const FORMAT: u16 = 2;
/// Formats still read: what their confidence is and whether their features are normalised.
fn meaning(format: u16) -> Option<(Gate, bool)> {
    match format {
        1 => Some((Gate::WholeAnswer, false)),
        2 => Some((Gate::Department, true)),
        _ => None,
    }
}
const DIGEST_LEN: usize = 32;

pub(super) fn write(model: &LocalModel) -> Vec<u8> {
    let weights = &model.weights;
    let mut out = Vec::with_capacity(64 + 4 * (weights.table.len() + weights.bias.len()));
    out.extend_from_slice(MAGIC);
    // A model is trained in the newest format or read from one (`meaning`): no other pair.
    let format = (1..=FORMAT)
        .find(|&f| meaning(f) == Some((model.gate, model.spec.normalise)))
        .expect("a model's gate and features are one format's");
    out.extend_from_slice(&format.to_le_bytes());
    out.extend_from_slice(&[
        model.spec.bucket_bits,
        model.spec.char_min,
        model.spec.char_max,
    ]);
    out.extend_from_slice(&model.spec.char_weight.to_le_bytes());
    out.extend_from_slice(&model.hyper.epochs.to_le_bytes());
    out.extend_from_slice(&model.hyper.learning_rate.to_le_bytes());
    out.extend_from_slice(&model.hyper.l2.to_le_bytes());
    out.extend_from_slice(&(model.examples as u64).to_le_bytes());
    for value in [
        model.calibration.temperature,
        model.calibration.urgent_scale,
        model.calibration.urgent_shift,
    ] {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.extend_from_slice(&(model.departments.len() as u16).to_le_bytes());
    for department in &model.departments {
        out.extend_from_slice(&(department.len() as u16).to_le_bytes());
        out.extend_from_slice(department.as_bytes());
    }
    for value in weights.table.iter().chain(&weights.bias) {
        out.extend_from_slice(&value.to_le_bytes());
    }
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&digest);
    out
}

pub(super) fn read(bytes: &[u8]) -> Result<LocalModel, ArtefactError> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(MAGIC.len(), "magic")? != MAGIC {
        return Err(ArtefactError::Magic);
    }
    let format = r.u16("format")?;
    let (gate, normalise) = meaning(format).ok_or(ArtefactError::Format {
        found: format,
        expected: FORMAT,
    })?;
    let spec = FeatureSpec {
        bucket_bits: r.u8("bucket bits")?,
        char_min: r.u8("n-gram lengths")?,
        char_max: r.u8("n-gram lengths")?,
        char_weight: r.f32("n-gram weight")?,
        normalise,
    };
    if !(8..=24).contains(&spec.bucket_bits) {
        return Err(ArtefactError::Malformed("bucket bits outside 8..=24"));
    }
    if !(1 <= spec.char_min && spec.char_min <= spec.char_max && spec.char_max <= 16) {
        return Err(ArtefactError::Malformed("n-gram lengths"));
    }
    let hyper = Hyper {
        epochs: r.u16("epochs")?,
        learning_rate: r.f32("learning rate")?,
        l2: r.f32("l2")?,
    };
    let examples = usize::try_from(r.u64("examples")?)
        .map_err(|_| ArtefactError::Malformed("example count"))?;
    let calibration = Calibration {
        temperature: r.f32("temperature")?,
        urgent_scale: r.f32("urgency scale")?,
        urgent_shift: r.f32("urgency shift")?,
    };
    let departments_len = usize::from(r.u16("departments")?);
    if departments_len == 0 || departments_len > MAX_DEPARTMENTS {
        return Err(ArtefactError::Malformed("department count"));
    }
    let mut departments = Vec::with_capacity(departments_len);
    for _ in 0..departments_len {
        let len = usize::from(r.u16("department")?);
        let name = std::str::from_utf8(r.take(len, "department")?)
            .map_err(|_| ArtefactError::Malformed("a department is not UTF-8"))?;
        departments.push(name.to_string());
    }
    let stride = departments_len + 1;
    let table_len = spec.buckets() * stride;
    let table = r.f32s(table_len, "weights")?;
    let bias = r.f32s(stride, "biases")?;
    let body_end = r.at;
    let digest = r.take(DIGEST_LEN, "digest")?;
    if r.at != bytes.len() {
        return Err(ArtefactError::TrailingBytes(bytes.len() - r.at));
    }
    if Sha256::digest(&bytes[..body_end]).as_slice() != digest {
        return Err(ArtefactError::Digest);
    }
    let finite = [
        spec.char_weight,
        calibration.temperature,
        calibration.urgent_scale,
        calibration.urgent_shift,
    ];
    if finite.iter().any(|v| !v.is_finite()) || calibration.temperature <= 0.0 {
        return Err(ArtefactError::Malformed("calibration or n-gram weight"));
    }
    Ok(LocalModel::assemble(
        departments,
        spec,
        hyper,
        calibration,
        examples,
        Weights {
            classes: departments_len,
            table,
            bias,
        },
        gate,
    ))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], ArtefactError> {
        let left = self.bytes.len() - self.at;
        if len > left {
            return Err(ArtefactError::Truncated {
                what,
                needed: len,
                left,
            });
        }
        let taken = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ArtefactError> {
        Ok(self.take(N, what)?.try_into().expect("took N bytes"))
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, ArtefactError> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, ArtefactError> {
        self.array(what).map(u16::from_le_bytes)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, ArtefactError> {
        self.array(what).map(u64::from_le_bytes)
    }

    fn f32(&mut self, what: &'static str) -> Result<f32, ArtefactError> {
        self.array(what).map(f32::from_le_bytes)
    }

    /// `count` floats, checked against what is left before anything is allocated.
    fn f32s(&mut self, count: usize, what: &'static str) -> Result<Vec<f32>, ArtefactError> {
        let len = count
            .checked_mul(4)
            .ok_or(ArtefactError::Malformed("too many weights"))?;
        let raw = self.take(len, what)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("chunks of 4")))
            .collect())
    }
}
