"""The data card's fixed statements, shared by the card (:mod:`.card`) and ``croissant.json`` (:mod:`.croissant`)."""

SENSITIVE_STATEMENT = (
    "The images are photos of people's faces, and every image carries a skin-tone label: skin tone is a proxy "
    "for racial or ethnic origin, a special category of personal data under GDPR Art. 9 (processing needs an "
    "Art. 9(2) condition, e.g. explicit consent), and a face photo can identify its person. No name is released: "
    "subjects appear by the project's pseudonymous subject_id, labelers by pseudonym."
)
#: How a release is maintained, whatever the lead adds (the card's Maintenance section, rai:dataReleaseMaintenancePlan).
RELEASE_MAINTENANCE = (
    "Each release is a numbered, immutable version: its files never change after publication, and "
    "manifest.json lists every file's SHA-256. A correction is published as the next version, whose data card "
    "lists what moved since the previous one. When a person photographed asks for their data to be deleted, "
    "their images leave every later release, and earlier releases are served with a notice that names the "
    "subject_id whose rows holders must delete."
)
#: What FairTone itself does to the data before release (the card's Preprocessing section; croissant.json).
RELEASE_PREPROCESSING = (
    "A photo released in imagefolder/ lost its metadata (EXIF including GPS location, XMP, IPTC, comments, text "
    "chunks) after its EXIF orientation was applied; the images table's sha256 is the checksum of the file as "
    "imported.",
    "Colorimetric baselines (ITA, CIELAB L*, hue angle, apparent albedo) were computed from the skin pixels of "
    "each photo with the parameters named by baseline_parameters_hash; they are cross-checks, not labels.",
)
