"""Synthetic clinical notes: patients, admissions, long-tailed diagnoses, five note sections.

The corpus is built so that sample difficulty varies widely: boilerplate sentences that any
model of clinical text predicts well sit next to rare diagnoses and number-heavy vitals, labs
and doses that no model can predict unless it memorised that very sample. That variation is
what fools a loss threshold and what a reference model explains away.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

FIRST_NAMES = (
    "James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard Susan "
    "Joseph Jessica Thomas Sarah Charles Karen Daniel Lisa Matthew Nancy Anthony Betty Mark Sandra Donald "
    "Ashley Steven Kimberly Andrew Emily Paul Donna Joshua Michelle Kenneth Carol Kevin Amanda Brian Melissa "
    "George Deborah Timothy Stephanie Ronald Rebecca Jason Sharon Edward Laura Jeffrey Cynthia Ryan Amy"
).split()
LAST_NAMES = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson "
    "Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis "
    "Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall "
    "Rivera Campbell Mitchell Carter Roberts Okafor Lindqvist Yamamoto Petrov Kowalski Haddad Oyelaran Brandt"
).split()

# (code, name, typical drug) in order of decreasing frequency; weights fall as 1/rank**1.2,
# so the last ones appear in a handful of patients only.
DIAGNOSES = (
    ("I10", "essential hypertension", "lisinopril"),
    ("E11.9", "type 2 diabetes mellitus", "metformin"),
    ("I50.9", "congestive heart failure", "furosemide"),
    ("J44.1", "COPD exacerbation", "prednisone"),
    ("N17.9", "acute kidney injury", "sodium bicarbonate"),
    ("J18.9", "community acquired pneumonia", "ceftriaxone"),
    ("I48.91", "atrial fibrillation", "metoprolol"),
    ("N39.0", "urinary tract infection", "nitrofurantoin"),
    ("A41.9", "sepsis", "vancomycin"),
    ("I21.4", "NSTEMI", "aspirin"),
    ("K92.2", "upper GI bleed", "pantoprazole"),
    ("E87.1", "hyponatremia", "sodium chloride tablets"),
    ("I63.9", "ischemic stroke", "atorvastatin"),
    ("K85.9", "acute pancreatitis", "hydromorphone"),
    ("D64.9", "anemia", "ferrous sulfate"),
    ("F10.239", "alcohol withdrawal", "lorazepam"),
    ("I26.99", "pulmonary embolism", "apixaban"),
    ("K70.30", "alcoholic cirrhosis", "lactulose"),
    ("E10.10", "diabetic ketoacidosis", "insulin glargine"),
    ("L03.115", "cellulitis of right lower limb", "cefazolin"),
    ("G40.909", "epilepsy", "levetiracetam"),
    ("C34.90", "lung adenocarcinoma", "pembrolizumab"),
    ("M32.14", "lupus nephritis", "mycophenolate"),
    ("K50.90", "Crohn disease", "infliximab"),
    ("B20", "HIV disease", "bictegravir"),
    ("I71.2", "thoracic aortic aneurysm", "labetalol"),
    ("G35", "multiple sclerosis", "ocrelizumab"),
    ("E83.01", "Wilson disease", "penicillamine"),
    ("M31.3", "granulomatosis with polyangiitis", "rituximab"),
    ("D59.3", "hemolytic uremic syndrome", "eculizumab"),
    ("E75.22", "Gaucher disease", "imiglucerase"),
    ("G71.01", "Duchenne muscular dystrophy", "deflazacort"),
    ("D76.1", "hemophagocytic lymphohistiocytosis", "etoposide"),
    ("E85.82", "wild type transthyretin amyloidosis", "tafamidis"),
    ("C96.1", "Erdheim Chester disease", "vemurafenib"),
    ("D81.810", "biotinidase deficiency", "biotin"),
)
SYMPTOMS = (
    "shortness of breath", "chest pain", "fever and chills", "abdominal pain", "altered mental status",
    "lower extremity swelling", "cough", "nausea and vomiting", "syncope", "weakness", "hematemesis",
    "dysuria", "palpitations", "headache", "melena", "back pain",
)
ROUTES = ("PO", "IV", "SC", "IM")
FREQUENCIES = ("daily", "BID", "TID", "q6h", "q8h", "qHS", "PRN")
OXYGEN = ("RA", "2L NC", "3L NC", "4L NC", "NRB", "BiPAP")
BOILERPLATE_SHARE = 0.3
SECTIONS = ("discharge_summary", "nursing", "radiology", "medication_list", "labs")

BOILERPLATE = {
    "discharge_summary": (
        "The patient was seen and examined on the day of discharge and was found to be in stable condition.",
        "Patient tolerated the procedure well and was transferred to the floor in stable condition.",
        "Follow up with your primary care physician within one to two weeks of discharge.",
        "Please return to the emergency department if you develop fever, chest pain or shortness of breath.",
        "Code status was confirmed as full code with the patient and family at the time of admission.",
    ),
    "nursing": (
        "Patient resting comfortably in bed, call light within reach, will continue to monitor.",
        "Fall precautions in place, bed in lowest position, side rails up times two.",
        "Pain well controlled on current regimen, patient denies any new complaints at this time.",
        "Tolerating diet without difficulty, voiding without difficulty, ambulating with assistance.",
    ),
    "radiology": (
        "No pneumothorax or pleural effusion is seen and the cardiomediastinal silhouette is within normal limits.",
        "Comparison is made to the prior study and there is no significant interval change.",
        "The osseous structures are unremarkable and the visualized soft tissues are normal.",
    ),
    "medication_list": (
        "Continue all home medications unless otherwise instructed by your physician.",
        "Medications were reconciled with the patient and the pharmacy at the time of discharge.",
    ),
    "labs": (
        "Labs were reviewed and were notable only for values as listed below.",
        "Blood cultures drawn on admission showed no growth to date at the time of this note.",
    ),
}


@dataclass(frozen=True)
class Patient:
    patient_id: str
    first_name: str
    last_name: str
    age: int
    sex: str
    # drug -> "amount mg route frequency": a patient's dose is the same in every note that mentions it,
    # as in real records, so a model can memorise patient-specific facts seen several times.
    regimen: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


def _number(rng: np.random.Generator, low: float, high: float, decimals: int = 0) -> str:
    value = rng.uniform(low, high)
    return f"{value:.{decimals}f}" if decimals else str(int(round(value)))


def _vitals(rng: np.random.Generator) -> str:
    return (
        f"Vitals: T {_number(rng, 96.8, 102.4, 1)}F, HR {_number(rng, 52, 134)}, "
        f"BP {_number(rng, 88, 188)}/{_number(rng, 44, 104)}, RR {_number(rng, 12, 30)}, "
        f"SpO2 {_number(rng, 86, 100)}% on {rng.choice(OXYGEN)}."
    )


def _labs(rng: np.random.Generator) -> str:
    panel = [
        ("Na", 124, 148, 0), ("K", 2.9, 6.1, 1), ("Cl", 92, 112, 0), ("HCO3", 14, 32, 0),
        ("BUN", 6, 88, 0), ("Cr", 0.5, 4.8, 1), ("Glu", 62, 488, 0), ("WBC", 2.1, 24.5, 1),
        ("Hgb", 6.4, 16.2, 1), ("Plt", 38, 512, 0), ("INR", 0.9, 3.8, 1), ("Lactate", 0.6, 6.2, 1),
    ]
    chosen = rng.choice(len(panel), size=int(rng.integers(4, 10)), replace=False)
    values = ", ".join(f"{panel[i][0]} {_number(rng, *panel[i][1:])}" for i in sorted(chosen))
    return f"Labs on {rng.choice(('admission', 'discharge', 'hospital day 2', 'hospital day 3'))}: {values}."


def _dose(rng: np.random.Generator, patient: Patient, drug: str) -> str:
    if drug not in patient.regimen:
        amount = rng.choice((0.5, 1, 2, 2.5, 5, 10, 12.5, 20, 25, 40, 50, 80, 100, 125, 250, 500, 1000))
        patient.regimen[drug] = f"{amount:g} mg {rng.choice(ROUTES)} {rng.choice(FREQUENCIES)}"
    return f"{drug} {patient.regimen[drug]}"


def _sentences(rng: np.random.Generator, section: str, patient: Patient, diagnoses: list[tuple]) -> list[str]:
    sex_word = "man" if patient.sex == "M" else "woman"
    main = diagnoses[0]
    others = " and ".join(d[1] for d in diagnoses[1:]) or "no other significant history"
    by_section = {
        "discharge_summary": [
            f"{patient.age} year old {sex_word} with history of {others} who presented with "
            f"{rng.choice(SYMPTOMS)} and was found to have {main[1]} ({main[0]}).",
            f"Discharge diagnosis: {main[1]}, ICD {main[0]}; secondary: {others}.",
            f"Hospital course was notable for {main[1]}, treated with {_dose(rng, patient, main[2])} "
            f"for {int(rng.integers(2, 15))} days with improvement.",
            _vitals(rng),
        ],
        "nursing": [
            _vitals(rng),
            f"Pt reports {rng.choice(SYMPTOMS)}, rated {int(rng.integers(0, 11))}/10, "
            f"given {_dose(rng, patient, main[2])} at {int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 60)):02d} with effect.",
            f"I/O {_number(rng, 400, 3200)}/{_number(rng, 300, 3500)} mL, UOP {_number(rng, 15, 180)} mL/hr.",
        ],
        "radiology": [
            f"CXR {rng.choice(('PA and lateral', 'portable AP', 'supine'))}: "
            f"{rng.choice(('bibasilar opacities', 'right lower lobe consolidation', 'mild pulmonary edema', 'a left apical nodule'))} "
            f"measuring {_number(rng, 0.4, 6.5, 1)} cm, concerning for {main[1]}.",
            f"CT {rng.choice(('head', 'chest', 'abdomen and pelvis'))} with contrast: "
            f"{_number(rng, 1, 4)} hypodense lesions, largest {_number(rng, 3, 48)} mm in segment {int(rng.integers(1, 9))}.",
        ],
        "medication_list": [
            "Medications on discharge: " + "; ".join(_dose(rng, patient, d[2]) for d in diagnoses) + ".",
            f"Started {_dose(rng, patient, main[2])}, held {_dose(rng, patient, str(rng.choice([d[2] for d in DIAGNOSES])))} "
            f"for Cr {_number(rng, 1.2, 4.8, 1)}.",
        ],
        "labs": [_labs(rng), _labs(rng), f"HbA1c {_number(rng, 5.1, 13.9, 1)}%, TSH {_number(rng, 0.1, 9.8, 2)}, "
                 f"BNP {_number(rng, 20, 4200)}, troponin {_number(rng, 0.01, 2.5, 2)}."],
    }
    specific = by_section[section]
    boilerplate = list(BOILERPLATE[section])
    sentences = []
    for _ in range(int(rng.integers(2, 5))):
        # Some sentences are boilerplate shared by every patient (easy for any model, and no
        # evidence of membership), the rest specific to this patient.
        pool = boilerplate if rng.random() < BOILERPLATE_SHARE else specific
        sentences.append(str(pool[int(rng.integers(len(pool)))]))
    return sentences


def _word_count(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


def _samples_from_sentences(rng: np.random.Generator, sentences: list[str]) -> list[str]:
    """Join sentences into samples of about 10 to 60 word-and-punctuation tokens."""
    samples, current = [], ""
    for sentence in sentences:
        candidate = f"{current} {sentence}".strip()
        if current and _word_count(candidate) > 60:
            samples.append(current)
            candidate = sentence
        current = candidate
        if _word_count(current) >= 10 and rng.random() < 0.6:
            samples.append(current)
            current = ""
    if current:
        samples.append(current)
    return samples


def _patients(rng: np.random.Generator, n_patients: int, id_prefix: str = "") -> list[Patient]:
    return [
        Patient(
            patient_id=f"{id_prefix}P{number:05d}",
            first_name=str(rng.choice(FIRST_NAMES)),
            last_name=str(rng.choice(LAST_NAMES)),
            age=int(rng.integers(18, 96)),
            sex=str(rng.choice(("M", "F"))),
        )
        for number in range(1, n_patients + 1)
    ]


def generate_notes(n_patients: int = 300, seed: int = 0, insert_names: bool = False, sections: tuple[str, ...] = SECTIONS,
                   id_prefix: str = "") -> pd.DataFrame:
    """Generate a synthetic clinical corpus: one row per sample, with patient and admission ids, its note's section and
    its admission's ICD-10 codes (`codes`, separated by ';'). `sections`: the kinds of note written (another hospital
    may keep other records); `id_prefix` keeps its patient ids apart from another corpus's."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(DIAGNOSES) + 1) ** 1.2
    weights /= weights.sum()
    rows = []
    for patient in _patients(rng, n_patients, id_prefix):
        for admission in range(1, int(rng.choice((1, 2, 3), p=(0.5, 0.3, 0.2))) + 1):
            codes = rng.choice(len(DIAGNOSES), size=int(rng.integers(1, 4)), replace=False, p=weights)
            diagnoses = [DIAGNOSES[i] for i in codes]
            admission_id = f"{patient.patient_id}-A{admission}"
            written = rng.choice(sections, size=min(int(rng.integers(3, 6)), len(sections)), replace=False)
            for note_number, section in enumerate(written, start=1):
                sentences = _sentences(rng, str(section), patient, diagnoses)
                for sample_number, text in enumerate(_samples_from_sentences(rng, sentences), start=1):
                    if insert_names:
                        text = f"{patient.first_name} {patient.last_name} {text}"
                    rows.append({
                        "sample_id": f"{admission_id}-N{note_number}-S{sample_number}",
                        "group_id": patient.patient_id,
                        "subgroup_id": admission_id,
                        "section": str(section),
                        "codes": ";".join(code for code, _, _ in diagnoses),  # the admission's ICD-10 codes
                        "text": text,
                    })
    return pd.DataFrame(rows)
